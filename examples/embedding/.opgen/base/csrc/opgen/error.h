// opgen errors: how a generated op fails. Paddle turns a common::PD_Exception thrown by an op into
// a Python exception (Paddle 2.6 catches nothing else: a std::runtime_error aborts the process).
// PD_THROW and PD_CHECK build it with std::ostream number formatting, which kills the process
// (SIGSEGV) when the op is compiled by a much newer g++ than libpaddle was (seen with Paddle 2.6
// on a GPU machine whose g++ is 13). So messages here are assembled from std::string
// pieces (std::to_string formats numbers without streams), and the exception is copied from an
// object with PD_Exception's layout, never constructed by its formatting constructor.
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "opgen/text.h"
#include "paddle/extension.h"

namespace opgen {

inline const char* DtypeName(paddle::DataType dtype) {
  switch (dtype) {
    case paddle::DataType::BOOL: return "bool";
    case paddle::DataType::INT8: return "int8";
    case paddle::DataType::UINT8: return "uint8";
    case paddle::DataType::INT16: return "int16";
    case paddle::DataType::INT32: return "int32";
    case paddle::DataType::INT64: return "int64";
    case paddle::DataType::FLOAT16: return "float16";
    case paddle::DataType::BFLOAT16: return "bfloat16";
    case paddle::DataType::FLOAT32: return "float32";
    case paddle::DataType::FLOAT64: return "float64";
    case paddle::DataType::COMPLEX64: return "complex64";
    case paddle::DataType::COMPLEX128: return "complex128";
    default: return "an unsupported dtype";
  }
}

inline std::string PlaceName(const paddle::Place& place) {
  switch (place.GetType()) {
    case phi::AllocationType::CPU: return "cpu";
    case phi::AllocationType::GPU: return "gpu:" + std::to_string(place.GetDeviceId());
    case phi::AllocationType::GPUPINNED: return "gpu_pinned";
    default: return "a device of type " + std::to_string(static_cast<int>(place.GetType()));
  }
}

namespace detail {

inline std::string Piece(const std::string& text) { return text; }
inline std::string Piece(const char* text) { return text; }
inline std::string Piece(paddle::DataType dtype) { return DtypeName(dtype); }
inline std::string Piece(const paddle::Place& place) { return PlaceName(place); }
template <typename N, std::enable_if_t<std::is_arithmetic_v<N>, int> = 0>
std::string Piece(N number) {
  return std::to_string(number);
}

// common::PD_Exception is a std::exception holding one std::string; this twin has its layout.
struct ExceptionTwin {
  virtual ~ExceptionTwin() = default;
  std::string message;
};
static_assert(sizeof(ExceptionTwin) == sizeof(common::PD_Exception) &&
                  alignof(ExceptionTwin) == alignof(common::PD_Exception),
              "common::PD_Exception changed its layout; opgen's error.h must follow it");

}  // namespace detail

// Raises `message` as Paddle's exception, which reaches Python as an error naming it.
[[noreturn]] inline void Raise(std::string message) {
  detail::ExceptionTwin twin;
  twin.message = std::move(message);
  // PD_Exception's copy constructor copies the string member; its own constructor would format.
  throw common::PD_Exception(*reinterpret_cast<const common::PD_Exception*>(&twin));
}

// Fail("op: input #", 1, " is ", dtype): concatenates the parts (strings, numbers, dtypes,
// places) and raises the message.
template <typename... Parts>
[[noreturn]] void Fail(const Parts&... parts) {
  std::string message;
  ((message += detail::Piece(parts)), ...);
  Raise(std::move(message));
}

}  // namespace opgen
