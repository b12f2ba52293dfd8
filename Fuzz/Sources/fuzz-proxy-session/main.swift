import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzProxySession))
