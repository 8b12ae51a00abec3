#pragma once
// tessera::optim: SGD, Adam, AdamW, RMSprop, Adagrad and the learning-rate schedulers.
#include <tessera/cpp/optim/adagrad.h>
#include <tessera/cpp/optim/adam.h>
#include <tessera/cpp/optim/optimizer.h>
#include <tessera/cpp/optim/rmsprop.h>
#include <tessera/cpp/optim/schedulers.h>
#include <tessera/cpp/optim/sgd.h>
