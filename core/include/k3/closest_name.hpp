// "Did you mean": the known name closest to a misspelt one, for pipeline keys, plugin names
// and plugin parameters alike.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

/// The name in `names` that `wanted` most likely meant: one equal to it ignoring case, else
/// the nearest by edit distance (case ignored) when it is close enough to be a typo — at
/// most a third of `wanted`'s length, and never more than 3 edits. "" when none is; also ""
/// when `wanted` itself is in `names` (nothing to suggest). Names are matched exactly
/// elsewhere; only the suggestion ignores case, so `URING` suggests `uring`.
std::string closest_name(std::string_view wanted, const std::vector<std::string>& names);

}  // namespace k3
