#pragma once
// The one header a C++ user includes.
#include <tessera/device.h>
#include <tessera/dispatcher.h>
#include <tessera/ops.h>
#include <tessera/runtime.h>
#include <tessera/generator.h>
#include <tessera/scalar.h>
#include <tessera/stream.h>
#include <tessera/tensor.h>
#if __has_include(<tessera/cpp/api.h>)
// The C++ API (frontend_cpp, target Tessera::cpp): autograd, nn, optim, Runtime, save/load.
#include <tessera/cpp/api.h>
#endif
