// HTTP1Core: placeholder until the module lands.
