// PolicyLoaderTests: placeholder until the suite lands.
