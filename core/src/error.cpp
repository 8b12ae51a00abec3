#include <tessera/abi.h>
#include <tessera/error.h>

namespace tessera {

void raise_for_status(int32_t status, std::string message) {
  switch (status) {
    case TS_ERROR_TYPE: throw TypeError(std::move(message));
    case TS_ERROR_VALUE: throw ValueError(std::move(message));
    case TS_ERROR_INDEX: throw IndexError(std::move(message));
    case TS_ERROR_NOT_IMPLEMENTED: throw NotImplementedError(std::move(message));
    case TS_ERROR_OUT_OF_MEMORY: throw OutOfMemoryError(std::move(message));
    default: throw RuntimeError(std::move(message));
  }
}

}  // namespace tessera
