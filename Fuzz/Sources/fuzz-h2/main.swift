import Foundation
import FuzzSupport

exit(runLibFuzzer(fuzzH2))
