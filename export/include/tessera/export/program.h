#pragma once
// The export runtime: runs a program that Python exported (ts.export.export + ts.export.save)
// from C++, with no Python anywhere.
//
//   tessera::exported::Program p = tessera::exported::load("model.tspt");
//   std::vector<tessera::Tensor> out = p.run({x});
//   p.to("cuda");                       // the weights move; inputs must then be on that device
//
// The archive (one zip file, see docs/export.md) holds the graph of primitive operators, the
// signature (which inputs are weights, the user inputs' dtypes, ranks and dims, the dynamic dims'
// ranges), the weights (safetensors) and metadata with a SHA-256 checksum of each part. Loading
// checks all of it and runs no code; plugins the graph needs beyond the device's (the namespace
// of an operator: "autograd::detach" needs "autograd") load lazily, once. run() is thread-safe:
// several threads may run one Program at once (a program that updates buffers, batch norm in
// training mode, runs one call at a time).
#include <tessera/device.h>
#include <tessera/tensor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tessera::exported {

// The newest archive format this runtime reads (2: parts checked with XXH3-128; 1: SHA-256).
inline constexpr int kArchiveFormatVersion = 2;

struct LoadOptions {
  // Use the ahead-of-time compiled kernels an archive may carry (native code: only when the
  // archive is trusted). Without it, the portable graph runs through the dispatcher.
  bool allow_native = false;
};

// One user input as the program expects it. A dim is its static size, or -1 when dynamic
// (then `dim_names` names it and `dim_ranges` bounds it).
// One node's median time over a profile's runs: the operator call, dispatch included.
struct NodeTime {
  std::string op;
  double microseconds = 0;
};

struct InputInfo {
  std::string name;  // forward's argument name: "x" ("x_0" for the first tensor of a tuple x)
  std::string path;  // where it was in the call: "args[0]", "kwargs['mask']"
  ScalarType dtype = kFloat32;
  std::vector<int64_t> dims;
  std::vector<std::string> dim_names;
  std::vector<std::pair<int64_t, int64_t>> dim_ranges;
};

class Program {
 public:
  // Runs the program on the user inputs, in the order of inputs(): its user outputs, in order.
  // ValueError naming the input for a wrong count, dtype, rank, device, static dim or a dynamic
  // dim out of its range.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  // Runs `repeats` times timing each operator call: the median per node, in graph order. What a
  // run costs beyond their sum is the runtime's own overhead.
  std::vector<NodeTime> profile(const std::vector<Tensor>& inputs, int repeats = 20) const;

  // Moves the weights to `device` (a plugin device, a vendor's included); later runs expect
  // their inputs there. Returns *this.
  Program& to(const Device& device);
  Device device() const;

  const std::vector<InputInfo>& inputs() const;
  size_t num_outputs() const;
  // The operators the graph calls ("add.Tensor", ...), the plugins it needs beyond the device's,
  // the archive's metadata (format_version, producer, target_devices).
  std::vector<std::string> operators() const;
  std::vector<std::string> plugins() const;
  std::map<std::string, std::string> metadata() const;
  // Parameters and buffers by their names in the exported module ("fc1.weight").
  std::vector<std::pair<std::string, Tensor>> state() const;
  // A short text: inputs, outputs, operator count, dynamic dims.
  std::string describe() const;
  // Whether calls at some sizes run the archive's ahead-of-time kernels, and if not, why.
  bool native() const;
  const std::string& native_reason() const;

  struct Impl;
  explicit Program(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::vector<Tensor> execute(const std::vector<Tensor>& inputs, std::vector<double>* node_us) const;
  std::shared_ptr<Impl> impl_;
};

// Reads and checks an archive. FileError when it cannot be read; ValueError naming the part and
// the problem for a truncated or tampered archive, a newer format version, a malformed part, or
// an operator that no loaded plugin provides.
Program load(const std::string& path, const LoadOptions& options = {});
// The same from the archive's bytes in memory (`where` names it in messages).
Program load_from_memory(std::span<const std::byte> archive, const LoadOptions& options = {},
                         const std::string& where = "<memory>");

}  // namespace tessera::exported
