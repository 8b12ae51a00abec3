#pragma once
// The host/device boundary of the ordering families: scans along a dim (scan.cu), searchsorted
// and bincount (bucket.cu). Plain structs and enum-keyed launchers, like ops_launch.h.
#include "launch.h"

namespace tessera::gpu {

// ---- scans (scan.cu) along the middle dim of a contiguous [outer, n, inner] input into a
// contiguous output of the same shape and dtype. Sum/Prod accumulate in `acc` (Double for
// floating dtypes, Int64 for integers) in the CPU plugin's order; Max/Min compare in the
// dtype's compute type and also store the int64 index where the running extreme was last
// reached (a NaN, once seen, stays).
enum class ScanOp : int32_t { Sum, Prod, Max, Min };
struct ScanArgs {
  const char* in = nullptr;
  char* out = nullptr;
  int64_t* indices = nullptr;  // Max/Min only
  int32_t dtype = 0;
  int64_t outer = 1, n = 1, inner = 1;
};
void launch_scan(ScanOp op, Compute acc, const ScanArgs& a, gpuStream_t stream);

// ---- searchsorted (bucket.cu): for each of `numel` values (contiguous, `dtype`), the index in its
// row of `sorted` (contiguous rows of n, `dtype`; row = value index / per_row) of the first
// boundary > value (right) or >= value (left), NaN ordering last; int32 or int64 out.
struct SearchArgs {
  const char* sorted = nullptr;
  const char* values = nullptr;
  char* out = nullptr;
  int32_t dtype = 0;
  bool out_int32 = false, right = false;
  int64_t numel = 0, per_row = 1, n = 0;
};
void launch_searchsorted(Compute c, const SearchArgs& a, gpuStream_t stream);

// ---- bincount (bucket.cu). `index` holds n int64 values >= 0 (checked by the host); out has
// one bin per value up to the largest. Without weights, int64 counts; with them (float32 or
// float64, the out's dtype) their sums, by atomics.
struct BincountArgs {
  const int64_t* index = nullptr;
  const char* weights = nullptr;
  char* out = nullptr;
  int32_t out_dtype = 0;
  int64_t n = 0;
};
void launch_bincount(const BincountArgs& a, gpuStream_t stream);
// *result = {smallest, largest} of the n int64 values (the host reads it back; n > 0).
void launch_minmax_int64(const int64_t* values, int64_t n, int64_t* result, gpuStream_t stream);

}  // namespace tessera::gpu
