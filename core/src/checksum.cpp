#include <tessera/checksum.h>

#include <cstdio>

// Header-only use of libxxhash (Debian's libxxhash-dev): nothing to link.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tessera {

std::string part_checksum(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits(data, size);
  char text[48];
  std::snprintf(text, sizeof text, "xxh3-128:%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return text;
}

}  // namespace tessera
