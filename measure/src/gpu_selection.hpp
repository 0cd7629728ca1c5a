#pragma once
/// Private to erg::measure: the one rule every monitor applies to a caller's GPU index list.

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "erg/core/result.hpp"

namespace erg::measure::detail {

/// The GPU positions a monitor follows: `requested` as given (order kept), or every one of the
/// `available` GPUs when none was requested. Errors (kInvalidArgument): an index out of range,
/// an index repeated.
inline Result<std::vector<unsigned>> select_gpu_indices(const std::optional<std::vector<unsigned>>& requested,
                                                        std::size_t available) {
  std::vector<unsigned> indices;
  if (!requested) {
    for (unsigned i = 0; i < available; ++i) indices.push_back(i);
    return indices;
  }
  std::set<unsigned> seen;
  for (unsigned i : *requested) {
    if (i >= available)
      return fail(ErrorCode::kInvalidArgument,
                  "GPU index " + std::to_string(i) + " is out of range (" + std::to_string(available) + " GPUs)");
    if (!seen.insert(i).second)
      return fail(ErrorCode::kInvalidArgument, "GPU index " + std::to_string(i) + " repeated");
    indices.push_back(i);
  }
  return indices;
}

}  // namespace erg::measure::detail
