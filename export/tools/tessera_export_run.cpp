// tessera-export-run: runs an exported program (ts.export.save's archive) on inputs from a
// safetensors file, writes its outputs to another, and optionally times it.
//   tessera-export-run ARCHIVE --input in.safetensors --output out.safetensors [--device D]
//                      [--allow-native] [--benchmark N] [--threads N] [--describe] [--timings]
// --threads N runs the inputs from N threads at once, 20 times each, and fails unless every
// result equals the first run's (the runtime's thread-safety check).
// --timings prints how long loading the archive and the first run took.
// Inputs are matched to the program's inputs by name ("x"), or taken in file order when the
// file's names are not the program's. Outputs are named output_0, output_1, ...
#include <tessera/cpp/api.h>
#include <tessera/export/program.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <string>
#include <vector>

namespace ts = tessera;

namespace {

[[noreturn]] void usage(const std::string& problem) {
  fmt::print(stderr,
             "tessera-export-run: {}\n"
             "usage: tessera-export-run ARCHIVE --input in.safetensors --output out.safetensors [--device D] "
             "[--allow-native] [--benchmark N] [--threads N] [--describe]\n",
             problem);
  std::exit(2);
}

std::vector<ts::Tensor> match_inputs(const ts::exported::Program& program, const ts::NamedTensors& file) {
  const auto& wanted = program.inputs();
  if (file.size() != wanted.size())
    throw ts::ValueError(fmt::format("the input file holds {} tensors; the program takes {} inputs", file.size(),
                                     wanted.size()));
  std::vector<ts::Tensor> out;
  bool by_name = std::all_of(wanted.begin(), wanted.end(), [&](const auto& in) {
    return std::any_of(file.begin(), file.end(), [&](const auto& f) { return f.first == in.name; });
  });
  for (size_t k = 0; k < wanted.size(); ++k) {
    if (!by_name) {
      out.push_back(file[k].second);
      continue;
    }
    for (const auto& [name, t] : file)
      if (name == wanted[k].name) out.push_back(t);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string archive, input, output, device;
  int benchmark = 0, threads = 0;
  bool describe = false, timings = false;
  ts::exported::LoadOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--input") input = value();
    else if (a == "--output") output = value();
    else if (a == "--device") device = value();
    else if (a == "--benchmark") benchmark = std::atoi(value().c_str());
    else if (a == "--threads") threads = std::atoi(value().c_str());
    else if (a == "--allow-native") options.allow_native = true;
    else if (a == "--describe") describe = true;
    else if (a == "--timings") timings = true;
    else if (a == "--help" || a == "-h") usage("runs an exported program");
    else if (!a.empty() && a[0] == '-') usage("unknown option " + a);
    else if (archive.empty()) archive = a;
    else usage("more than one archive given");
  }
  if (archive.empty()) usage("no archive given");
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  const auto load_start = Clock::now();
  ts::exported::Program program = ts::exported::load(archive, options);
  const double load_ms = ms_since(load_start);
  if (!device.empty()) program.to(ts::Device(device));
  if (describe) fmt::print("{}", program.describe());
  if (input.empty()) {
    if (describe) return 0;
    usage("no --input given");
  }
  std::vector<ts::Tensor> inputs = match_inputs(program, ts::load_safetensors(input));
  for (auto& t : inputs) t = t.to(program.device());
  const auto run_start = Clock::now();
  std::vector<ts::Tensor> outputs = program.run(inputs);
  if (timings) fmt::print("load {:.1f} ms, first run {:.1f} ms\n", load_ms, ms_since(run_start));
  if (threads > 0) {
    std::atomic<int> mismatches{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (int r = 0; r < 20; ++r) {
          std::vector<ts::Tensor> again = program.run(inputs);
          for (size_t k = 0; k < again.size(); ++k)
            if (again[k].to_double_vector() != outputs[k].to_double_vector()) ++mismatches;
        }
      });
    for (auto& t : pool) t.join();
    if (mismatches > 0) throw ts::RuntimeError(fmt::format("{} results from concurrent runs differ from the first run", mismatches.load()));
    fmt::print("{} threads x 20 runs: every result equals the first run's\n", threads);
  }
  if (benchmark > 0) {
    std::vector<double> us;
    for (int r = 0; r < benchmark; ++r) {
      auto start = std::chrono::steady_clock::now();
      program.run(inputs);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(us.begin(), us.end());
    double nodes_us = 0;
    auto per_node = program.profile(inputs, benchmark);
    for (const auto& n : per_node) nodes_us += n.microseconds;
    fmt::print("{} runs: median {:.1f} us, min {:.1f} us, max {:.1f} us; {} operator calls sum to {:.1f} us (medians): "
               "runtime overhead {:.1f} us a run\n",
               benchmark, us[us.size() / 2], us.front(), us.back(), per_node.size(), nodes_us,
               us[us.size() / 2] - nodes_us);
  }
  if (!output.empty()) {
    ts::NamedTensors named;
    for (size_t k = 0; k < outputs.size(); ++k) named.emplace_back(fmt::format("output_{}", k), outputs[k].to("cpu"));
    ts::save_safetensors(output, named);
  }
  return 0;
} catch (const ts::Error& e) {
  fmt::print(stderr, "tessera-export-run: {}\n", e.what());
  return 1;
}
