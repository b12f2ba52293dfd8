// ATSPolicyTests: placeholder until the suite lands.
