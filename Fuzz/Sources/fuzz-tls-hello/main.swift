import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzTLSHello))
