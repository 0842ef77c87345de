// The ranges of ServeOptions (k3/serve.hpp), checked once by the Server before it binds.
#pragma once
#include <cstddef>
#include <cstdint>

#include <k3/serve.hpp>

namespace k3::serve {

inline constexpr std::uint64_t kMaxQueue = 256;               ///< waiting requests
inline constexpr std::uint64_t kMaxBodyBytes = 256ull << 20;  ///< 256 MiB
inline constexpr std::uint64_t kMinHeaderBytes = 256;         ///< a request line and a few fields
inline constexpr std::uint64_t kMaxHeaderBytes = 1u << 20;
inline constexpr std::uint64_t kMaxHeaderFields = 10000;
inline constexpr std::uint64_t kMaxConnections = 65536;
inline constexpr std::int64_t kMaxDefaultTokens = 1 << 20;  ///< job.max_new_tokens' bound
inline constexpr double kMaxIoSeconds = 3600;               ///< header, body, a write
inline constexpr double kMaxRequestSeconds = 7 * 86400;     ///< queue wait + generation
inline constexpr std::int64_t kMaxSnapshotInterval = 1 << 30;

/// UsageError naming the flag, its range and the value, for the first option out of range.
void check_options(const ServeOptions& options);

}  // namespace k3::serve
