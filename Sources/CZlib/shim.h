// zlib, for the Inflate target (an .ipa member, captured gzip and deflate bodies).
#pragma once
#include <zlib.h>
