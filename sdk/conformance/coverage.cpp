#include "coverage.h"

#include <tessera/cpu_fallback.h>
#include <tessera/derived_variant.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <vector>

namespace tessera::conformance {
namespace {

enum class Coverage { Kernel, Derived, Composite, CpuFallback, Missing };

// How a call of `op` on the device would run, in the dispatcher's order.
Coverage coverage_of(OperatorHandle op, int32_t key) {
  if (const KernelEntry* k = op->kernel(key); k && !k->fallthrough) return Coverage::Kernel;
  if (op->kind() != OperatorKind::Primitive) return Coverage::Composite;  // over the device's primitives
  if (detail::can_derive_variant(op, key)) return Coverage::Derived;
  if (detail::cpu_fallback_can_run(op)) return Coverage::CpuFallback;
  return Coverage::Missing;
}

}  // namespace

void print_coverage(int32_t key, const std::string& device) {
  std::map<Coverage, std::vector<std::string>> by;
  size_t total = 0;
  for (OperatorHandle op : Dispatcher::instance().operators()) {
    if (op->defined_by() != "core") continue;  // ops.yaml's operators, not plugins' own
    by[coverage_of(op, key)].push_back(op->name());
    ++total;
  }
  for (auto& [c, names] : by) std::ranges::sort(names);
  auto count = [&](Coverage c) { return by[c].size(); };
  fmt::print("\nCoverage of core/ops.yaml on '{}' ({} overloads)\n\n", device, total);
  fmt::print("  {:>4}  implemented: the device's own kernels\n", count(Coverage::Kernel));
  fmt::print("  {:>4}  derived: in-place and out= variants run as the device's functional kernel + copy_\n",
             count(Coverage::Derived));
  fmt::print("  {:>4}  composite: decomposed into other operators (on the device where it has them)\n",
             count(Coverage::Composite));
  fmt::print("  {:>4}  falling back: run on the CPU with copies (TESSERA_CPU_FALLBACK=0 makes them errors)\n",
             count(Coverage::CpuFallback));
  fmt::print("  {:>4}  missing: neither (views the device lacks, which cannot fall back)\n", count(Coverage::Missing));
  // The primitives a vendor would write next, and what cannot run at all.
  if (!by[Coverage::CpuFallback].empty())
    fmt::print("\n  falling back: {}\n", fmt::join(by[Coverage::CpuFallback], ", "));
  if (!by[Coverage::Missing].empty()) fmt::print("\n  missing: {}\n", fmt::join(by[Coverage::Missing], ", "));
}

}  // namespace tessera::conformance
