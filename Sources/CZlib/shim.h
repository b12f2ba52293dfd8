// zlib, for inflating an .ipa's Info.plist member (PolicyLoader's ZipMemberReader).
#pragma once
#include <zlib.h>
