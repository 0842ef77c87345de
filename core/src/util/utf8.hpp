// Streaming text out token by token: a BPE piece may end inside a multi-byte UTF-8 character,
// so what is sent holds back the bytes of an unfinished one until the token that completes
// it. The one rule for every stream of generated text (the job's TextStream, serve's replies,
// the chat completion parser).
#pragma once
#include <cstddef>
#include <string_view>

namespace k3::util {

/// The length of the longest prefix of `bytes` that does not end inside a multi-byte UTF-8
/// character: a trailing lead byte still missing continuation bytes is held back with them
/// (at most 3 bytes: a 4-byte character's lead and two continuations). Bytes that can never
/// become valid UTF-8 (a stray continuation, a byte that cannot lead, F8..FF) are not held:
/// they would wait forever.
[[nodiscard]] std::size_t whole_utf8_prefix(std::string_view bytes) noexcept;

}  // namespace k3::util
