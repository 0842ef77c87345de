// The tiktoken tokenizer: Kimi-style chunking (optional), then special tokens (when asked
// for), then the pre-tokenizer pattern, then rank BPE on each piece.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <k3/tokenizer.hpp>

#include "chunking.hpp"
#include "pretokenizer.hpp"
#include "rank_table.hpp"
#include "special_tokens.hpp"

namespace k3::tiktoken {

struct EncodeScratch;

struct TiktokenConfig {
  RankTable ranks;
  std::string pattern;     ///< PCRE2 source (UTF + UCP)
  SpecialTokens specials;  ///< finished
  ChunkLimits limits;
};

class TiktokenTokenizer final : public sdk::Tokenizer {
 public:
  explicit TiktokenTokenizer(TiktokenConfig config);

  [[nodiscard]] std::uint32_t vocab_size() const noexcept override { return vocab_size_; }
  sdk::Status encode(std::string_view text, bool parse_special, std::vector<std::uint32_t>& out) noexcept override;
  sdk::Status decode(std::span<const std::uint32_t> ids, std::string& out) noexcept override;
  sdk::Status special_id(std::string_view text, std::uint32_t& id) noexcept override;

 private:
  void encode_ordinary(std::string_view segment, MatchScratch& scratch, EncodeScratch& work,
                       std::vector<std::uint32_t>& out) const;

  RankTable ranks_;
  SpecialTokens specials_;
  ChunkLimits limits_;
  CompiledPattern pattern_;
  std::uint32_t vocab_size_ = 0;
};

}  // namespace k3::tiktoken
