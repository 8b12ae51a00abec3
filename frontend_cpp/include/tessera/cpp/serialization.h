#pragma once
// Weights on disk in the safetensors format (core's safetensors.h): a module's state_dict, or any
// named tensors.
//
//   tessera::save(model, "mlp.safetensors");
//   tessera::load(model, "mlp.safetensors");   // strict: the keys must match
#include <tessera/cpp/nn/module.h>
#include <tessera/safetensors.h>

#include <string>

namespace tessera {

// Writes the module's state_dict (atomically: a temporary file renamed over `path`).
void save(const nn::Module& module, const std::string& path, const SafetensorsMetadata& metadata = {});
void save(const NamedTensors& tensors, const std::string& path, const SafetensorsMetadata& metadata = {});
// Loads the file into the module's parameters and buffers (see Module::load_state_dict).
// FileError when unreadable, ValueError when not safetensors or the keys / shapes do not match.
void load(nn::Module& module, const std::string& path, bool strict = true);
NamedTensors load(const std::string& path);

}  // namespace tessera
