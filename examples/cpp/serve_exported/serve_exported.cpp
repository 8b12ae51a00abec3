// Serves a program exported from Python (export_model.py) with no Python: loads the archive,
// answers request batches of different sizes from four threads at once (one Program, shared),
// and checks each answer against the one eager Tessera gave.
//   serve_exported model.tspt requests.safetensors
#include <tessera/cpp/api.h>
#include <tessera/export/program.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>
#include <vector>

namespace ts = tessera;

int main(int argc, char** argv) try {
  if (argc < 3) {
    fmt::print(stderr, "usage: serve_exported ARCHIVE REQUESTS.safetensors\n");
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  ts::exported::Program program = ts::exported::load(argv[1]);
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{}loaded in {:.1f} ms\n", program.describe(), load_ms);

  std::map<std::string, ts::Tensor> file;
  for (auto& [name, t] : ts::load(argv[2])) file[name] = t;
  std::vector<std::pair<ts::Tensor, ts::Tensor>> requests;  // input, expected output
  for (int k = 0; file.count(fmt::format("request_{}", k)); ++k)
    requests.emplace_back(file[fmt::format("request_{}", k)], file[fmt::format("expected_{}", k)]);

  std::atomic<int> wrong{0}, served{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w)
    workers.emplace_back([&, w] {
      for (int r = 0; r < 10; ++r) {
        const auto& [input, expected] = requests[size_t(w + r) % requests.size()];
        ts::Tensor out = program.run({input})[0];
        double err = (out - expected).abs().amax().item<double>();
        if (!(err < 1e-4)) ++wrong;
        ++served;
      }
    });
  for (auto& t : workers) t.join();
  fmt::print("served {} requests from 4 threads; {} differ from eager\n", served.load(), wrong.load());

  // A request the program cannot take is refused with the reason, and the server goes on.
  try {
    program.run({ts::randn({2, 3, 28, 28})});
  } catch (const ts::ValueError& e) {
    fmt::print("refused a bad request: {}\n", e.what());
  }
  return wrong == 0 ? 0 : 1;
} catch (const ts::Error& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
