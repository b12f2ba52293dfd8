// TLSCoreTests: placeholder until the suite lands.
