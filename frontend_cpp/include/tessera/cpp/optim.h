#pragma once
// tessera::optim: SGD, Adam, AdamW.
#include <tessera/cpp/optim/adam.h>
#include <tessera/cpp/optim/optimizer.h>
#include <tessera/cpp/optim/sgd.h>
