// ProxyEventLoopTests: placeholder until the suite lands.
