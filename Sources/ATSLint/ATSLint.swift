// ATSLint: placeholder until the module lands.
