import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzHTTP1))
