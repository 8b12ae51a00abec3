// A C++ program that links only libtessera.so. The CPU backend is not linked: the host finds
// libtessera_cpu.so in its plugin folder (or on TESSERA_PLUGIN_PATH) the first time a CPU
// tensor is made, and every operator call travels
//   generated entry point -> dispatcher -> C ABI -> CPU kernel.
#include <tessera/tessera.h>

#include <fmt/format.h>

namespace ts = tessera;

int main() try {
  ts::manual_seed(0);
  ts::Tensor x = ts::reshape(ts::arange(ts::Scalar(6), ts::kFloat32), {2, 3});  // [[0,1,2],[3,4,5]]
  ts::Tensor w = ts::reshape(ts::mul(ts::arange(ts::Scalar(6)), 0.25), {3, 2});  // int64 * float -> float32
  ts::Tensor y = ts::add(ts::matmul(x, w), ts::ones({2}));  // broadcast add
  ts::Tensor p = ts::softmax(y, -1);

  fmt::print("x           = {}\n", x.str());
  fmt::print("x @ w + 1   = {}\n", y.str());
  fmt::print("softmax(-1) = {}\n", p.str());
  fmt::print("sum over dim 1 = {}\n", ts::sum(p, std::vector<int64_t>{1}).str());
  fmt::print("mean of randn(10000) = {:.4f}\n", ts::mean(ts::randn({10000})).item_double());
  fmt::print("\nLoaded plugins:\n{}", ts::describe_plugins());
  fmt::print("\nKernels for add.Tensor:\n{}", ts::Dispatcher::instance().describe_text("add.Tensor"));
  return 0;
} catch (const ts::Error& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
