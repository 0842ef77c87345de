// The mergeable ranks of a tiktoken rank file: token bytes <-> rank. A rank is both the
// token id and the merge priority (lower merges first), exactly as in tiktoken.
//
// File format (tiktoken's load_tiktoken_bpe): one "<base64 bytes> <rank>" per line, empty
// lines ignored. Refused, naming file:line: a line that is not two fields, bad base64, an
// empty token, a rank that is not a decimal integer or is above kMaxRank, a rank or a token
// that an earlier line already used.
//
// Lookups are read-only and thread-safe after construction.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace k3::tiktoken {

using Rank = std::uint32_t;
inline constexpr Rank kNoRank = 0xFFFFFFFFu;
/// Ranks above this are refused: ids index dense tables (the largest public vocabularies
/// have about 200k entries; 2^24 keeps a corrupt file from asking for gigabytes).
inline constexpr Rank kMaxRank = (1u << 24) - 1;

class RankTable {
 public:
  /// Parses the text of a rank file; `name` (its URI) prefixes error messages ("name:line").
  /// Throws TokenizerError (invalid_argument).
  static RankTable parse(const std::string& data, const std::string& name);
  /// The rank of exactly these bytes, or kNoRank.
  [[nodiscard]] Rank rank_of(std::string_view bytes) const noexcept;
  /// The bytes of a rank; empty when no token has this rank (a gap in the file).
  [[nodiscard]] std::string_view bytes_of(Rank rank) const noexcept;
  /// One past the largest rank (0 for an empty table).
  [[nodiscard]] Rank end() const noexcept { return static_cast<Rank>(by_rank_.size()); }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

 private:
  struct Slot {
    std::uint32_t offset = 0;  ///< into bytes_
    std::uint32_t length = 0;  ///< 0 = empty slot (tokens are never empty)
    std::uint32_t hash = 0;    ///< low 32 bits of the key's hash, checked before memcmp
    Rank rank = kNoRank;
  };
  struct Span {
    std::uint32_t offset = 0;
    std::uint32_t length = 0;
  };
  /// One parsed entry; `line` names it in errors.
  struct Entry {
    Span span;
    Rank rank = 0;
    std::size_t line = 0;
  };

  void build(const std::vector<Entry>& entries, const std::string& origin);

  std::string bytes_;          ///< every token's bytes, back to back
  std::vector<Slot> slots_;    ///< open addressing, linear probing, size a power of two
  std::vector<Span> by_rank_;  ///< rank -> bytes (length 0 for a gap)
  std::size_t count_ = 0;
};

}  // namespace k3::tiktoken
