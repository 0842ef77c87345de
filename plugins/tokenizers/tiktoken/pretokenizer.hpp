// The pre-tokenizer: a PCRE2 pattern (UTF + UCP, JIT-compiled when the platform allows)
// whose successive leftmost matches cut the text into pieces for BPE, as tiktoken's
// regex.find_iter does.
//
// Presets reproduce the official pat_str of each encoding in PCRE2 syntax (see
// pretokenizer.cpp for how each construct maps and why). Thread-safety: the compiled
// pattern is shared read-only; each thread brings its own MatchScratch.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <k3/status.hpp>

struct pcre2_real_code_8;
struct pcre2_real_match_data_8;
struct pcre2_real_match_context_8;
struct pcre2_real_jit_stack_8;

namespace k3::tiktoken {

/// The PCRE2 source of a preset ("kimi", "cl100k", "o200k"), or of "regex:<pattern>".
/// Throws TokenizerError for any other name.
std::string pattern_source(std::string_view spec);

/// Per-thread matching state (match data and a JIT stack big enough for long pieces).
class MatchScratch {
 public:
  MatchScratch();
  ~MatchScratch();
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;

  pcre2_real_match_data_8* data = nullptr;
  pcre2_real_match_context_8* context = nullptr;
  pcre2_real_jit_stack_8* jit_stack = nullptr;
};

/// A compiled pattern. `utf` selects UTF+UCP mode (pre-tokenizer) or byte mode (literal
/// special-token alternation).
class CompiledPattern {
 public:
  CompiledPattern(const std::string& source, bool utf, const std::string& what);
  ~CompiledPattern();
  CompiledPattern(const CompiledPattern&) = delete;
  CompiledPattern& operator=(const CompiledPattern&) = delete;

  /// Finds the leftmost match in subject at or after `from`. Returns false if none; else
  /// sets [begin, end). Throws TokenizerError if PCRE2 gives up (resource limits).
  bool find(std::string_view subject, std::size_t from, MatchScratch& scratch, std::size_t& begin,
            std::size_t& end) const;
  [[nodiscard]] bool jit() const noexcept { return jit_; }

 private:
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
  bool utf_ = false;
  std::string what_;
};

/// Cuts `subject` (valid UTF-8) into the pattern's successive matches, appended to `pieces`.
/// Refused (TokenizerError invalid_argument): an empty match, or text between matches that
/// the pattern skips — tiktoken would silently drop it, which breaks decode(encode(x)) == x.
void split_pieces(const CompiledPattern& pattern, std::string_view subject, MatchScratch& scratch,
                  std::vector<std::string_view>& pieces);

}  // namespace k3::tiktoken
