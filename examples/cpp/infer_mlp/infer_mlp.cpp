// Loads the weights train_mlp saved and classifies fresh points, without gradients.
//   infer_mlp [weights.safetensors]
#include "mlp.h"

#include <fmt/format.h>

namespace ts = tessera;

int main(int argc, char** argv) try {
  std::string path = argc > 1 ? argv[1] : "mlp.safetensors";
  ts::Runtime rt({.plugins = {"cpu"}, .seed = 1});  // another seed: points the model has not seen

  auto model = mlp::make_model();
  ts::load(model, path);
  model.eval();

  auto [x, y] = mlp::spirals(500);
  ts::autograd::NoGradGuard no_grad;
  double acc = mlp::accuracy(model(x), y);
  fmt::print("accuracy on {} new points: {:.3f}\n", x.size(0), acc);
  ts::Tensor probe = ts::tensor_from_values(std::vector<double>{0.2, 0.1, -0.2, -0.1}, {2, 2});
  fmt::print("class probabilities of two probe points: {}\n", model(probe).softmax(1).str());
  if (acc < 0.9) {
    fmt::print(stderr, "error: accuracy {:.3f} is below 0.9\n", acc);
    return 1;
  }
  return 0;
} catch (const ts::Error& e) {
  fmt::print(stderr, "error: {}\n", e.what());
  return 1;
}
