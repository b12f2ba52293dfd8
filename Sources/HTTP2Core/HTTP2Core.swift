// HTTP2Core: placeholder until the module lands.
