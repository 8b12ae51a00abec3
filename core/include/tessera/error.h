#pragma once
// Error types of the host. Messages are built with fmt and say what was expected,
// what was got, and where (operator, plugin, device).
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tessera {

// Base of every error Tessera raises. `kind` lets the Python frontend map it to the
// matching exception type (TypeError, ValueError, IndexError, NotImplementedError...).
class Error : public std::runtime_error {
 public:
  enum class Kind { Runtime, Type, Value, Index, NotImplemented, OutOfMemory, Plugin, Schema };
  Error(Kind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

#define TESSERA_DEFINE_ERROR(Name, K)                                        \
  class Name : public Error {                                               \
   public:                                                                  \
    explicit Name(std::string message) : Error(Kind::K, std::move(message)) {} \
  };
TESSERA_DEFINE_ERROR(RuntimeError, Runtime)
TESSERA_DEFINE_ERROR(TypeError, Type)
TESSERA_DEFINE_ERROR(ValueError, Value)
TESSERA_DEFINE_ERROR(IndexError, Index)
TESSERA_DEFINE_ERROR(NotImplementedError, NotImplemented)
TESSERA_DEFINE_ERROR(OutOfMemoryError, OutOfMemory)
TESSERA_DEFINE_ERROR(PluginError, Plugin)
TESSERA_DEFINE_ERROR(SchemaError, Schema)
#undef TESSERA_DEFINE_ERROR

// Throws `E` with a fmt-formatted message.
template <class E = RuntimeError, class... Args>
[[noreturn]] void raise(fmt::format_string<Args...> format, Args&&... args) {
  throw E(fmt::format(format, std::forward<Args>(args)...));
}

// Throws the error type that matches a C ABI status (TS_ERROR_VALUE -> ValueError, ...).
[[noreturn]] void raise_for_status(int32_t status, std::string message);

}  // namespace tessera

#define TESSERA_CHECK(cond, ...)                                   \
  do {                                                             \
    if (!(cond)) ::tessera::raise<::tessera::RuntimeError>(__VA_ARGS__); \
  } while (0)
