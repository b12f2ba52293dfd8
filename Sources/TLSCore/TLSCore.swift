// TLSCore: placeholder until the module lands.
