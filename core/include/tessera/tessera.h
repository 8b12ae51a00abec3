#pragma once
// The one header a C++ user includes.
#include <tessera/device.h>
#include <tessera/dispatcher.h>
#include <tessera/ops.h>
#include <tessera/runtime.h>
#include <tessera/scalar.h>
#include <tessera/tensor.h>
