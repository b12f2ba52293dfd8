// PolicyLoader: placeholder until the module lands.
