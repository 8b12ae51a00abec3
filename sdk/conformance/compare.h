#pragma once
// Comparing what an operator returned on the device with what it returned on the CPU.
#include <tessera/tessera.h>

#include <optional>
#include <string>
#include <vector>

namespace tessera::conformance {

// allclose bounds for a dtype: |device - cpu| <= atol + rtol * |cpu|. Exact for integers.
struct Tolerance {
  double rtol = 0, atol = 0;
  std::string str() const;
};
Tolerance tolerance_for(ScalarType dtype);

// The outcome of running one side: its returns, or the kind and text of the error it raised.
struct Outcome {
  std::vector<ts_value> returns;  // tensors owned by `tensors`
  std::vector<Tensor> tensors;
  std::optional<Error::Kind> error;
  std::string message;
};
// Calls `op` through the dispatcher on `stack`, catching any error.
Outcome run(OperatorHandle op, ts_stack* stack);

struct Verdict {
  bool passed = true;
  double max_abs_error = 0;
  Tolerance tolerance;
  std::string why;  // for a failure
};
// Device and CPU agree when both raised the same kind of error, or when every return has the
// same dtype and shape, lives on the device, and is allclose (NaNs equal). With
// `values_are_random` only dtype and shape are compared.
Verdict compare(const Outcome& device, const Outcome& cpu, Device expected_device, bool values_are_random);

}  // namespace tessera::conformance
