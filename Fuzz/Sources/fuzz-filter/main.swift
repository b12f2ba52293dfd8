import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzFilter))
