import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzWebRouter))
