import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzWireGuard))
