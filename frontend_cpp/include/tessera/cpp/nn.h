#pragma once
// tessera::nn: modules, initialisers and functional forms (torch.nn's C++ counterpart).
#include <tessera/cpp/nn/activation.h>
#include <tessera/cpp/nn/container.h>
#include <tessera/cpp/nn/conv.h>
#include <tessera/cpp/nn/dropout.h>
#include <tessera/cpp/nn/embedding.h>
#include <tessera/cpp/nn/functional.h>
#include <tessera/cpp/nn/init.h>
#include <tessera/cpp/nn/linear.h>
#include <tessera/cpp/nn/loss.h>
#include <tessera/cpp/nn/module.h>
#include <tessera/cpp/nn/normalization.h>
#include <tessera/cpp/nn/pooling.h>
#include <tessera/cpp/nn/rnn.h>
#include <tessera/cpp/nn/utils/rnn.h>
