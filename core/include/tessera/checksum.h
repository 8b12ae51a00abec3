#pragma once
// The checksum export archives keep of each part (metadata.json's "parts"): XXH3-128, written
// "xxh3-128:<32 hex digits>". It catches a damaged or edited part; it is not a signature (whoever
// can edit a part can edit the metadata too), so a fast non-cryptographic hash serves: it reads
// 44 MB of weights in a few milliseconds where SHA-256 took 25, most of a cold start.
#include <cstddef>
#include <string>

namespace tessera {

std::string part_checksum(const void* data, size_t size);

}  // namespace tessera
