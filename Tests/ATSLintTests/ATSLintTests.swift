// ATSLintTests: placeholder until the suite lands.
