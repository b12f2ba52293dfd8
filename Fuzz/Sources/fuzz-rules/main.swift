import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzRules))
