import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzPlist))
