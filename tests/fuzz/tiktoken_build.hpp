// Builds a tiktoken tokenizer from file texts exactly as the plugin's factory does
// (plugins/tokenizers/tiktoken/plugin.cpp, create()): rank file, the Kimi pattern and
// chunk limits, specials from a tokenizer_config.json and an inline list, then the 256
// reserved ids. The harnesses compile the plugin's sources in, so libFuzzer's coverage
// sees them; TokenizerError is the plugin's documented refusal (it becomes a Status).
#pragma once
#include <memory>
#include <string>

#include "tiktoken/pretokenizer.hpp"
#include "tiktoken/tiktoken_tokenizer.hpp"
#include "tiktoken/tokenizer_error.hpp"

namespace k3::fuzz {

inline std::unique_ptr<tiktoken::TiktokenTokenizer> build_tiktoken(const std::string& ranks, const std::string& config,
                                                                   const std::string& specials) {
  using namespace k3::tiktoken;
  constexpr std::uint32_t kReserved = 256;  // the kimi pattern preset's defaults
  TiktokenConfig cfg{RankTable::parse(ranks, "tiktoken.model"), pattern_source("kimi"), {}, {400000, 25000}};
  if (!config.empty()) cfg.specials.add_from_config(config, "tokenizer_config.json");
  if (!specials.empty()) cfg.specials.add_inline(specials);
  if (kReserved > kMaxRank - cfg.ranks.end())
    fail(sdk::StatusCode::invalid_argument, "num_reserved_special_tokens: too large");
  cfg.specials.add_reserved(cfg.ranks.end(), kReserved);
  cfg.specials.finish();
  return std::make_unique<TiktokenTokenizer>(std::move(cfg));
}

/// A status the tokenizer may refuse with (bad input), as opposed to internal or
/// out_of_memory, which mean an undocumented exception inside.
inline bool is_refusal(const sdk::Status& st) {
  return st.code == sdk::StatusCode::invalid_argument || st.code == sdk::StatusCode::not_found;
}

}  // namespace k3::fuzz
