// HTTP2CoreTests: placeholder until the suite lands.
