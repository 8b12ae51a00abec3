// Trains a small MLP on two spirals with autograd and Adam, then saves its weights.
//   train_mlp [weights.safetensors]
// Built out of tree against an installed Tessera (find_package(Tessera) + Tessera::cpp); only the
// plugins it needs load: cpu (named here), autograd (on the first requires_grad_).
#include "mlp.h"

#include <fmt/format.h>

namespace ts = tessera;
namespace F = tessera::nn::functional;

int main(int argc, char** argv) try {
  std::string path = argc > 1 ? argv[1] : "mlp.safetensors";
  ts::Runtime rt({.plugins = {"cpu"}, .seed = 0});

  auto [x, y] = mlp::spirals(256);
  auto model = mlp::make_model();
  ts::optim::Adam opt(model.parameters(), {.lr = 0.01});

  double first = 0, last = 0;
  for (int step = 0; step <= 600; ++step) {
    opt.zero_grad();
    ts::Tensor logits = model(x);
    ts::Tensor loss = F::cross_entropy(logits, y);
    loss.backward();
    opt.step();
    last = loss.item<double>();
    if (step == 0) first = last;
    if (step % 100 == 0) fmt::print("step {:4d}  loss {:.4f}  accuracy {:.3f}\n", step, last, mlp::accuracy(logits, y));
  }
  ts::save(model, path, {{"model", "mlp 2-32-32-2"}});
  fmt::print("loss {:.4f} -> {:.4f}; weights saved to {}\n", first, last, path);
  fmt::print("plugins loaded:\n{}", rt.describe());
  if (!(last < first / 4)) {
    fmt::print(stderr, "error: the loss did not fall enough\n");
    return 1;
  }
  return 0;
} catch (const ts::Error& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
