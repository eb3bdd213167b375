// opgen text: how error messages print a shape. Plain C++ (no Paddle, no CUDA), so the
// Paddle-free runtime headers share it with error.h. Numbers go through std::to_string: ostream
// number formatting kills the process inside ops on some machines (see error.h).
// Copied verbatim into each generated op by opgen; edit it in opgen's templates, not here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace opgen {

// "[2, 3]"; "[]" for a 0-d shape.
inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace opgen
