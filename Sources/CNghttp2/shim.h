// nghttp2 header. Debian 12 ships 1.52: only the old mem_recv/mem_send API exists.
#pragma once
#include <nghttp2/nghttp2.h>
