// opgen errors: how a generated op fails. Paddle turns an exception thrown by an op's kernel into
// a Python exception that keeps its message only for the types it knows:
//   - Paddle 2.6 catches common::PD_Exception (a std::runtime_error aborts the process);
//   - Paddle 3's static executor keeps a common::enforce::EnforceNotMet whole, but copies any other
//     std::exception into a plain std::exception, whose message reads "std::exception".
// So ops built against Paddle 3 (whose paddle/extension.h defines CUSTOM_OP_WITH_SPMD) throw
// EnforceNotMet, with the error code EXTERNAL (an OSError in Python, as Paddle makes of a
// PD_Exception in eager mode), and ops built against Paddle 2.6 throw PD_Exception.
// Their constructors format with std::ostream, which kills the process (SIGSEGV) when the op is
// compiled by a much newer g++ than libpaddle was (seen with Paddle 2.6 on a GPU machine whose
// g++ is 13). So messages here are assembled from std::string pieces (std::to_string formats
// numbers without streams), and each exception is copied from an object with its layout, never
// constructed by its formatting constructor.
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

#ifdef CUSTOM_OP_WITH_SPMD
// common::enforce::EnforceNotMet (Paddle 3): an error code, the message as Paddle's static
// executor reads it (error_str: it indents each line of it after the program's call stack, and
// drops the text after the last newline, so it ends with one) and as what() gives it (the simple
// form), and a guard whose destructor does nothing when its flag is set.
struct ExceptionTwin {
  virtual ~ExceptionTwin() = default;
  common::ErrorCode code = common::ErrorCode::EXTERNAL;
  std::string message_with_newline;
  std::string message;
  bool paddle_fatal_already_skipped = true;
};
using Exception = common::enforce::EnforceNotMet;
#else
// common::PD_Exception (Paddle 2.6): a std::exception holding one std::string.
struct ExceptionTwin {
  virtual ~ExceptionTwin() = default;
  std::string message;
};
using Exception = common::PD_Exception;
#endif
static_assert(sizeof(ExceptionTwin) == sizeof(Exception) &&
                  alignof(ExceptionTwin) == alignof(Exception),
              "Paddle's exception changed its layout; opgen's error.h must follow it");

}  // namespace detail

// Raises `message` as Paddle's exception, which reaches Python as an error naming it.
[[noreturn]] inline void Raise(std::string message) {
  detail::ExceptionTwin twin;
#ifdef CUSTOM_OP_WITH_SPMD
  twin.message_with_newline = message + "\n";
#endif
  twin.message = std::move(message);
  // The exception's copy constructor copies the members; its own constructors would format.
  throw detail::Exception(*reinterpret_cast<const detail::Exception*>(&twin));
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
