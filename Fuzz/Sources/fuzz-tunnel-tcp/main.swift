import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzTunnelTCP))
