#pragma once
// The errors of the distributed layer, as torch.distributed's: DistError and its kinds. The Python
// frontend raises them as tessera.distributed.DistError, DistStoreError, ... (RuntimeErrors).
#include <tessera/error.h>

namespace tessera::distributed {

class DistError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};
// A store failed: a timeout waiting for keys, a server that went away, a port in use.
class DistStoreError : public DistError {
 public:
  using DistError::DistError;
};
// A collective failed or timed out in its backend.
class DistBackendError : public DistError {
 public:
  using DistError::DistError;
};
// A network failure reaching a peer or a store.
class DistNetworkError : public DistError {
 public:
  using DistError::DistError;
};

}  // namespace tessera::distributed
