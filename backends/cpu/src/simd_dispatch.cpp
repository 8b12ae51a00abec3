// Chooses the vector kernel table once, at plugin registration: the best ISA the CPU has, or
// the one TESSERA_CPU_ISA names (scalar|avx2|avx512|auto). A forced ISA the CPU lacks falls
// back to the best one it has, with a note on stderr; when the variable is set, the choice is
// printed to stderr so tests and benchmarks can tell which path ran.
#include "simd_table.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessera::cpu::simd {
namespace {

std::atomic<const Table*> g_table{nullptr};

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f") && cpu_has_avx2();
#else
  return false;
#endif
}

const Table* best() {
  if (cpu_has_avx512() && avx512_table()) return avx512_table();
  if (cpu_has_avx2() && avx2_table()) return avx2_table();
  return scalar_table();
}

}  // namespace

void select_isa() {
  const char* want = std::getenv("TESSERA_CPU_ISA");
  const Table* t = best();
  if (want && *want && std::strcmp(want, "auto") != 0) {
    if (std::strcmp(want, "scalar") == 0) {
      t = scalar_table();
    } else if (std::strcmp(want, "avx2") == 0 && cpu_has_avx2() && avx2_table()) {
      t = avx2_table();
    } else if (std::strcmp(want, "avx512") == 0 && cpu_has_avx512() && avx512_table()) {
      t = avx512_table();
    } else {
      std::fprintf(stderr, "tessera_cpu: TESSERA_CPU_ISA=%s is unknown or unsupported by this CPU/build; using %s\n",
                   want, t->isa);
    }
  }
  if (want && *want) std::fprintf(stderr, "tessera_cpu: element-wise kernels use %s\n", t->isa);
  g_table.store(t, std::memory_order_release);
}

const Table& table() {
  const Table* t = g_table.load(std::memory_order_acquire);
  return t ? *t : *scalar_table();
}

}  // namespace tessera::cpu::simd
