#pragma once
// A stable LSD radix sort of one row of 4- or 8-byte keys with their int64 indices, for long
// rows (sort.cpp uses it from kRadixMinLength elements): 11-bit digits, 3 passes for 32-bit keys
// and 6 for 64-bit ones, each a histogram and a scatter. Keys are mapped to unsigned integers
// whose order is the values' order: NaN largest (every NaN one key, so NaNs keep their order),
// -0.0 equal to +0.0; descending order complements the key, which keeps equal values stable.
#include <tessera/sdk/dtype.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace tessera::cpu::radix {

inline constexpr int64_t kRadixMinLength = 2048;

template <class T> inline constexpr bool supported = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                                     std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

template <class T>
using Key = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <class T>
Key<T> to_key(T v) {
  using K = Key<T>;
  constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return ~K(0);
    if (v == T(0)) v = T(0);  // -0.0 sorts with +0.0
    K bits;
    std::memcpy(&bits, &v, sizeof bits);
    return (bits & sign) ? ~bits : (bits | sign);
  } else {
    return K(v) ^ sign;  // two's complement: flipping the sign bit orders it as unsigned
  }
}

// Sorts src[0..n) into values/indices (stable; descending complements the keys).
template <class T>
void sort_row(const T* src, int64_t n, bool descending, T* values, int64_t* indices) {
  using K = Key<T>;
  constexpr int kBits = 11, kBuckets = 1 << kBits;
  constexpr int kPasses = (int(sizeof(K)) * 8 + kBits - 1) / kBits;
  std::vector<K> keys(static_cast<size_t>(n)), keys_tmp(static_cast<size_t>(n));
  std::vector<int64_t> idx(static_cast<size_t>(n)), idx_tmp(static_cast<size_t>(n));
  std::vector<int64_t> counts(size_t(kPasses) * kBuckets, 0);
  for (int64_t i = 0; i < n; ++i) {
    K k = to_key(src[i]);
    if (descending) k = ~k;
    keys[size_t(i)] = k;
    idx[size_t(i)] = i;
    for (int p = 0; p < kPasses; ++p) ++counts[size_t(p) * kBuckets + ((k >> (p * kBits)) & (kBuckets - 1))];
  }
  for (int p = 0; p < kPasses; ++p) {
    int64_t* c = &counts[size_t(p) * kBuckets];
    if (c[(keys[0] >> (p * kBits)) & (kBuckets - 1)] == n) continue;  // every key has this digit: nothing moves
    int64_t sum = 0;
    for (int b = 0; b < kBuckets; ++b) {
      int64_t here = c[b];
      c[b] = sum;
      sum += here;
    }
    for (int64_t i = 0; i < n; ++i) {
      K k = keys[size_t(i)];
      int64_t to = c[(k >> (p * kBits)) & (kBuckets - 1)]++;
      keys_tmp[size_t(to)] = k;
      idx_tmp[size_t(to)] = idx[size_t(i)];
    }
    keys.swap(keys_tmp);
    idx.swap(idx_tmp);
  }
  for (int64_t i = 0; i < n; ++i) {
    indices[i] = idx[size_t(i)];
    values[i] = src[idx[size_t(i)]];
  }
}

}  // namespace tessera::cpu::radix
