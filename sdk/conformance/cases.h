#pragma once
// Test cases for one operator, generated from its schema: which inputs (random tensors of a
// dtype and shape, int lists, scalars...) and, for each side, a boxed stack holding them.
#include <tessera/tessera.h>

#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace tessera::conformance {

// The shape families every tensor-taking operator is tried with.
enum class Layout { Basic, ZeroSize, Scalar0d, Broadcast, NonContiguous };
std::string_view layout_name(Layout l);

struct Case {
  ScalarType dtype;
  Layout layout;
  std::string label() const;  // "float32, broadcast"
};

// Why an operator or a case cannot be run (an empty string: it can).
struct Plan {
  std::vector<Case> cases;
  std::string unsupported;  // set when no input can be generated from the schema
  bool values_are_random = false;  // empty, rand...: compare dtype and shape only
};
Plan plan_for(OperatorHandle op);

// The arguments of one case on one side (CPU or the device), owning what the stack points to.
class Inputs {
 public:
  // Builds the CPU arguments of `c` for `op` with a seeded generator. Returns nullopt with
  // `skip_reason` set when the case needs something the device lacks (a view kernel).
  static std::optional<Inputs> make(OperatorHandle op, const Case& c, Device device, int32_t device_key,
                                    uint64_t seed, std::string& skip_reason);
  ts_stack* cpu_stack() { return &cpu_.stack; }
  ts_stack* device_stack() { return &device_.stack; }

 private:
  struct Side {
    std::vector<ts_value> values;
    std::deque<Tensor> tensors;
    std::deque<std::vector<Tensor>> lists;
    ts_stack stack{};
  };
  Side cpu_, device_;
  std::deque<std::vector<int64_t>> int_lists_;
  std::deque<std::vector<double>> double_lists_;
  std::deque<std::string> strings_;
};

}  // namespace tessera::conformance
