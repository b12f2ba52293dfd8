// ProxyEventLoop: placeholder until the module lands.
