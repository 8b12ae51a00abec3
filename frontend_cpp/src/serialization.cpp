// tessera::save / tessera::load over core's safetensors functions.
#include <tessera/cpp/serialization.h>

namespace tessera {

void save(const nn::Module& module, const std::string& path, const SafetensorsMetadata& metadata) {
  save_safetensors(path, module.state_dict(), metadata);
}

void save(const NamedTensors& tensors, const std::string& path, const SafetensorsMetadata& metadata) {
  save_safetensors(path, tensors, metadata);
}

void load(nn::Module& module, const std::string& path, bool strict) {
  module.load_state_dict(load_safetensors(path), strict);
}

NamedTensors load(const std::string& path) { return load_safetensors(path); }

}  // namespace tessera
