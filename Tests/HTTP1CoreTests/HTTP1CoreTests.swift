// HTTP1CoreTests: placeholder until the suite lands.
