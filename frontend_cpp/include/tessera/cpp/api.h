#pragma once
// The C++ API (target Tessera::cpp, libtessera-cpp.so): everything <tessera/tessera.h> adds on top
// of the core when it is installed. Tensor methods (t.add(u), t.backward(), ...) are members of
// tessera::Tensor itself (tensor.h + the generated tensor_methods.h).
#include <tessera/cpp/autograd.h>
#include <tessera/cpp/func.h>
#include <tessera/cpp/function.h>
#include <tessera/cpp/nn.h>
#include <tessera/cpp/operators.h>
#include <tessera/cpp/optim.h>
#include <tessera/cpp/profiler.h>
#include <tessera/cpp/runtime.h>
#include <tessera/cpp/serialization.h>
