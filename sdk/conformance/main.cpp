// tessera-conformance: checks every operator a device plugin registers against the CPU.
//   tessera-conformance --plugin <path> --device <name> [--ops <glob>] [--verbose] | --help
// Loads the plugin, finds the operators with a kernel at the device's dispatch key, runs each
// on generated inputs (every dtype; basic, zero-size, 0-dim, broadcast and non-contiguous
// shapes) on the device and on the CPU, and prints a table. Then checks the device's own
// functions (copies; streams, events, record_stream and pinned memory where offered). Exit
// status: 0 when every case and check passed, 1 when one failed, 2 on a usage or loading error.
#include "cases.h"
#include "compare.h"
#include "coverage.h"
#include "device_checks.h"

#include <tessera/device_registry.h>

#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>

using namespace tessera;
using namespace tessera::conformance;

namespace {

struct Options {
  std::string plugin, device, ops = "*";
  bool verbose = false, help = false, list_ops = false;
};

constexpr const char* kUsage =
    "usage: tessera-conformance --plugin <path> --device <name> [--ops <glob>] [--verbose]\n"
    "       tessera-conformance --list-ops [--plugin <path>] [--ops <glob>]\n";

constexpr const char* kHelp = R"(
Checks every operator a device plugin registers against the CPU plugin, then the device's own
functions (copies; streams, events, record_stream and pinned memory where the plugin offers them).

  --plugin <path>   the plugin to load (libtessera_<name>.so)
  --device <name>   the device type it registers, whose kernels are checked
  --ops <glob>      only operators whose name matches (fnmatch), e.g. 'add.*' (default: all)
  --verbose, -v     every case, and why a case was skipped
  --list-ops        print the schema of every registered operator overload (with --plugin, its own
                    operators too; with --ops, those whose name matches) and exit
  --help, -h        this text

Exit status: 0 when every case and check passed, 1 when one failed, 2 on a usage or loading error.
)";

int usage(const std::string& problem) {
  fmt::print(stderr, "tessera-conformance: {}\n{}", problem, kUsage);
  return 2;
}

std::optional<Options> parse(int argc, char** argv, std::string& problem) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    std::optional<std::string> v;
    if (a == "--verbose" || a == "-v") { o.verbose = true; continue; }
    if (a == "--help" || a == "-h") { o.help = true; return o; }
    if (a == "--list-ops") { o.list_ops = true; continue; }
    if (a != "--plugin" && a != "--device" && a != "--ops") { problem = fmt::format("unknown option '{}'", a); return std::nullopt; }
    if (!(v = next())) { problem = fmt::format("option {} expects a value", a); return std::nullopt; }
    (a == "--plugin" ? o.plugin : a == "--device" ? o.device : o.ops) = *v;
  }
  if (!o.list_ops && (o.plugin.empty() || o.device.empty())) {
    problem = "--plugin and --device are required";
    return std::nullopt;
  }
  return o;
}

struct Row {
  std::string op;
  int run = 0, passed = 0, failed = 0, skipped = 0;
  double max_abs_error = 0;
  Tolerance loosest;
  std::vector<std::string> failures;
  std::string note;
  std::map<std::string, int> skip_reasons;  // why cases were skipped, counted
};

Row check_operator(OperatorHandle op, Device device, int32_t key, bool verbose) {
  Row row{op->name()};
  Plan plan = plan_for(op);
  if (!plan.unsupported.empty()) {
    row.skipped = 1;
    row.note = plan.unsupported;
    ++row.skip_reasons[plan.unsupported];
    if (verbose) fmt::print("  {}: skipped: {}\n", op->name(), plan.unsupported);
    return row;
  }
  for (size_t i = 0; i < plan.cases.size(); ++i) {
    const Case& c = plan.cases[i];
    std::string skip;
    uint64_t seed = std::hash<std::string>{}(op->name()) ^ (i * 0x9E3779B97F4A7C15ull);
    std::optional<Inputs> inputs;
    try {
      inputs = Inputs::make(op, c, device, key, seed, skip);
    } catch (const std::exception& e) {
      skip = fmt::format("could not build inputs: {}", e.what());
    }
    if (!inputs) {
      ++row.skipped;
      ++row.skip_reasons[skip];
      if (verbose) fmt::print("  {} [{}]: skipped: {}\n", op->name(), c.label(), skip);
      continue;
    }
    ++row.run;
    Outcome on_device = run(op, inputs->device_stack());
    Outcome on_cpu = run(op, inputs->cpu_stack());
    Verdict v = compare(on_device, on_cpu, device, plan.values_are_random);
    row.max_abs_error = std::max(row.max_abs_error, v.max_abs_error);
    if (v.tolerance.rtol > row.loosest.rtol || v.tolerance.atol > row.loosest.atol) row.loosest = v.tolerance;
    if (v.passed) ++row.passed;
    else {
      ++row.failed;
      row.failures.push_back(fmt::format("{} [{}]: {}", op->name(), c.label(), v.why));
    }
    if (verbose)
      fmt::print("  {} [{}]: {}{}\n", op->name(), c.label(), v.passed ? "ok" : "FAIL: ", v.passed ? "" : v.why);
  }
  return row;
}

void print_table(const std::vector<Row>& rows, const std::string& device, const std::string& plugin) {
  std::string total_label = fmt::format("TOTAL ({} operators)", rows.size());
  size_t w = total_label.size();
  for (auto& r : rows) w = std::max(w, r.op.size());
  auto line = [&](std::string_view op, auto run, auto passed, auto failed, auto skipped, std::string_view err,
                  std::string_view tol) {
    fmt::print("{:<{}} | {:>9} | {:>6} | {:>6} | {:>7} | {:>13} | {}\n", op, w, run, passed, failed, skipped, err, tol);
  };
  fmt::print("\nConformance of device '{}' ({}) against the CPU\n\n", device, plugin);
  fmt::print("Tolerances, one table for every check (|device - cpu| <= atol + rtol * |cpu|): {}; integers and bool: "
             "exact\n\n",
             fmt::join(std::vector<std::string>{"float64 " + tolerance_for(kFloat64).str(),
                                                "float32 " + tolerance_for(kFloat32).str(),
                                                "float16 " + tolerance_for(kFloat16).str(),
                                                "bfloat16 " + tolerance_for(kBFloat16).str()},
                       "; "));
  line("operator", "cases run", "passed", "failed", "skipped", "max abs error", "tolerance");
  fmt::print("{}\n", std::string(w + 72, '-'));
  Row total{"TOTAL"};
  for (auto& r : rows) {
    line(r.op, r.run, r.passed, r.failed, r.skipped, fmt::format("{:.3g}", r.max_abs_error),
         r.note.empty() ? r.loosest.str() : "(" + r.note + ")");
    total.run += r.run, total.passed += r.passed, total.failed += r.failed, total.skipped += r.skipped;
    total.max_abs_error = std::max(total.max_abs_error, r.max_abs_error);
  }
  fmt::print("{}\n", std::string(w + 72, '-'));
  line(total_label, total.run, total.passed, total.failed, total.skipped,
       fmt::format("{:.3g}", total.max_abs_error), total.failed ? "FAILED" : "ok");
  // Skips are not failures, but the summary says why each was skipped (every case with --verbose).
  if (total.skipped) {
    fmt::print("\nSkipped cases, by operator and reason ({} in all; --verbose lists each case):\n", total.skipped);
    for (auto& r : rows)
      for (auto& [reason, count] : r.skip_reasons) fmt::print("  {:>4}  {}: {}\n", count, r.op, reason);
  }
  bool any = false;
  for (auto& r : rows)
    for (size_t i = 0; i < r.failures.size() && i < 5; ++i) {
      if (!any) fmt::print("\nFailures (up to 5 per operator):\n");
      any = true;
      fmt::print("  FAIL {}\n", r.failures[i]);
    }
}

// --list-ops: one schema a line, sorted, in PyTorch's schema language; composites marked; a count.
int list_operators(const Options& options) {
  try {
    init();
    if (!options.plugin.empty()) load_plugin(options.plugin);
  } catch (const std::exception& e) {
    return usage(fmt::format("cannot load {}: {}", options.plugin, e.what()));
  }
  // Composites (a decomposition a device need not implement) are marked after their schema.
  std::vector<std::string> schemas;
  int composites = 0;
  for (OperatorHandle op : Dispatcher::instance().operators()) {
    if (fnmatch(options.ops.c_str(), op->name().c_str(), 0) != 0) continue;
    bool composite = op->kind() != OperatorKind::Primitive;
    composites += composite;
    schemas.push_back(op->schema().to_string() + (composite ? fmt::format("  # {}", operator_kind_name(op->kind())) : ""));
  }
  std::ranges::sort(schemas);
  for (const std::string& s : schemas) fmt::print("{}\n", s);
  fmt::print("# {} overloads: {} primitives, {} composites\n", schemas.size(), schemas.size() - size_t(composites), composites);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string problem;
  auto options = parse(argc, argv, problem);
  if (!options) return usage(problem);
  if (options->help) {
    fmt::print("{}{}", kUsage, kHelp);
    return 0;
  }
  if (options->list_ops) return list_operators(*options);
  int32_t key = -1;
  Device device;
  try {
    init();
    const PluginInfo& info = load_plugin(options->plugin);
    const DeviceTypeEntry* entry = DeviceRegistry::instance().find(options->device);
    if (!entry)
      return usage(fmt::format("plugin '{}' ({}) does not provide device '{}'; it provides: [{}]", info.name,
                               options->plugin, options->device, fmt::join(info.devices, ", ")));
    key = entry->key;
    device = Device(entry->type, 0);
  } catch (const std::exception& e) {
    return usage(fmt::format("cannot load {}: {}", options->plugin, e.what()));
  }

  std::vector<OperatorHandle> ops;
  for (OperatorHandle op : Dispatcher::instance().operators()) {
    const KernelEntry* k = op->kernel(key);
    if (k && !k->fallthrough && fnmatch(options->ops.c_str(), op->name().c_str(), 0) == 0) ops.push_back(op);
  }
  std::ranges::sort(ops, {}, [](OperatorHandle op) { return op->name(); });
  if (ops.empty()) {
    fmt::print(stderr, "tessera-conformance: device '{}' has no kernel matching '{}'\n", options->device, options->ops);
    return 1;
  }
  std::vector<Row> rows;
  for (OperatorHandle op : ops) rows.push_back(check_operator(op, device, key, options->verbose));
  print_table(rows, options->device, options->plugin);
  print_coverage(key, options->device);
  bool failed = std::ranges::any_of(rows, [](const Row& r) { return r.failed > 0; });
  fmt::print("\nDevice functions of '{}'\n\n", options->device);
  for (const DeviceCheck& c : check_device_functions(device)) {
    fmt::print("  {:<4} {}{}\n", c.passed ? "ok" : "FAIL", c.name, c.detail.empty() ? "" : ": " + c.detail);
    failed = failed || !c.passed;
  }
  std::fflush(stdout);
  return failed ? 1 : 0;
}
