#define PCRE2_CODE_UNIT_WIDTH 8
#include "pretokenizer.hpp"

#include <pcre2.h>

#include "tokenizer_error.hpp"

namespace k3::tiktoken {

using sdk::StatusCode;

namespace {

// How the official pat_str (Rust regex / fancy-regex syntax, as run by tiktoken) maps to PCRE2
// with PCRE2_UTF | PCRE2_UCP:
//  - \s in Rust is the Unicode White_Space property. PCRE2's \s (= \p{Zs}, \h, \v) also takes
//    U+180E, so \s, \S and [^\s...] are written with \p{White_Space} / \P{White_Space}.
//  - \p{Han} in Rust is Script=Han; PCRE2 10.40+ reads a bare \p{Han} as Script_Extensions
//    (which adds e.g. 、 U+3001), so it is written \p{sc:Han}.
//  - (?i:'s|...) matches with Unicode simple case folding in both ('ſ U+017F counts as 's).
//  - Kimi's class intersections [A&&[^\p{Han}]] (PCRE2 10.42 has no set operations) become
//    (?:(?!\p{sc:Han})[A]): one code point that is not Han, then a member of A.
// Everything else (\p{L}, \p{N}, \p{Lu}, ..., lookahead, greedy leftmost-first alternation)
// means the same in both engines. tests/oracle checks all three presets against npm tiktoken
// (the Rust engine compiled to WASM) and Node's /v regex on a multilingual corpus.
#define K3_WS R"(\p{White_Space})"
#define K3_NWS R"(\P{White_Space})"
#define K3_CONTRACTIONS R"((?i:'s|'t|'re|'ve|'m|'ll|'d))"

constexpr const char* kCl100k = K3_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^)" K3_WS
                                                R"(\p{L}\p{N}]+[\r\n]*|)" K3_WS R"(*[\r\n]+|)" K3_WS R"(+(?!)" K3_NWS
                                                R"()|)" K3_WS "+";

constexpr const char* kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)" K3_CONTRACTIONS
    R"(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)" K3_CONTRACTIONS
    R"(?|\p{N}{1,3}| ?[^)" K3_WS R"(\p{L}\p{N}]+[\r\n/]*|)" K3_WS R"(*[\r\n]+|)" K3_WS R"(+(?!)" K3_NWS R"()|)" K3_WS
    "+";

#define K3_UPPER_NOT_HAN R"((?:(?!\p{sc:Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]))"
#define K3_LOWER_NOT_HAN R"((?:(?!\p{sc:Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}]))"

// arch-refs §9, in order: Han runs; words (lower-case tail); words (upper-case head); up to
// three digits; punctuation runs; newlines; whitespace not followed by non-space; whitespace.
constexpr const char* kKimi = R"(\p{sc:Han}+)"
                              R"(|[^\r\n\p{L}\p{N}]?)" K3_UPPER_NOT_HAN "*" K3_LOWER_NOT_HAN "+" K3_CONTRACTIONS
                              "?"
                              R"(|[^\r\n\p{L}\p{N}]?)" K3_UPPER_NOT_HAN "+" K3_LOWER_NOT_HAN "*" K3_CONTRACTIONS
                              "?"
                              R"(|\p{N}{1,3})"
                              R"(| ?[^)" K3_WS R"(\p{L}\p{N}]+[\r\n]*)"
                              "|" K3_WS R"(*[\r\n]+)"
                              "|" K3_WS "+(?!" K3_NWS
                              ")"
                              "|" K3_WS "+";

// Long runs (up to max_run_chars code points, or the whole text) can make the JIT
// backtrack deeply through the lookahead groups; the stack grows on demand up to this.
constexpr std::size_t kJitStackStart = 64 * 1024;
constexpr std::size_t kJitStackMax = 256 * 1024 * 1024;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return "PCRE2 error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string pattern_source(std::string_view spec) {
  if (spec == "kimi") return kKimi;
  if (spec == "cl100k") return kCl100k;
  if (spec == "o200k") return kO200k;
  if (spec.starts_with("regex:")) return std::string(spec.substr(6));
  fail(StatusCode::invalid_argument,
       "pattern: unknown preset '" + std::string(spec) + "' (kimi, cl100k, o200k or regex:<PCRE2 pattern>)");
}

MatchScratch::MatchScratch() {
  data = pcre2_match_data_create(1, nullptr);
  context = pcre2_match_context_create(nullptr);
  jit_stack = pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr);
  if (data == nullptr || context == nullptr) fail(StatusCode::out_of_memory, "PCRE2 match data");
  if (jit_stack != nullptr) pcre2_jit_stack_assign(context, nullptr, jit_stack);
}

MatchScratch::~MatchScratch() {
  pcre2_jit_stack_free(jit_stack);
  pcre2_match_context_free(context);
  pcre2_match_data_free(data);
}

CompiledPattern::CompiledPattern(const std::string& source, bool utf, const std::string& what)
    : utf_(utf), what_(what) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  const std::uint32_t options = utf ? (PCRE2_UTF | PCRE2_UCP) : 0u;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options, &err, &offset, nullptr);
  if (code_ == nullptr)
    fail(StatusCode::invalid_argument,
         what + ": does not compile at offset " + std::to_string(offset) + ": " + pcre2_message(err));
  // JIT is a speed-up only; without it (platform or SELinux refusal) pcre2_match interprets.
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

CompiledPattern::~CompiledPattern() { pcre2_code_free(code_); }

bool CompiledPattern::find(std::string_view subject, std::size_t from, MatchScratch& scratch, std::size_t& begin,
                           std::size_t& end) const {
  // The tokenizer validates UTF-8 once per text, so PCRE2 need not re-check every call.
  const std::uint32_t options = utf_ ? PCRE2_NO_UTF_CHECK : 0u;
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = jit_ ? pcre2_jit_match(code_, s, subject.size(), from, options, scratch.data, scratch.context)
                : pcre2_match(code_, s, subject.size(), from, options, scratch.data, scratch.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // fall back to the interpreter, which uses the heap
    rc = pcre2_match(code_, s, subject.size(), from, options | PCRE2_NO_JIT, scratch.data, scratch.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0)
    fail(StatusCode::internal, what_ + ": matching failed at byte " + std::to_string(from) + ": " + pcre2_message(rc));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
  begin = ov[0];
  end = ov[1];
  return true;
}

void split_pieces(const CompiledPattern& pattern, std::string_view subject, MatchScratch& scratch,
                  std::vector<std::string_view>& pieces) {
  std::size_t pos = 0;
  while (pos < subject.size()) {
    std::size_t begin = 0, end = 0;
    if (!pattern.find(subject, pos, scratch, begin, end) || begin != pos)
      fail(StatusCode::invalid_argument, "pattern: leaves bytes from offset " + std::to_string(pos) +
                                             " of a text segment unmatched (the pre-tokenizer must cover all text)");
    if (end == begin)
      fail(StatusCode::invalid_argument,
           "pattern: matches the empty string at offset " + std::to_string(pos) + " of a text segment");
    pieces.push_back(subject.substr(begin, end - begin));
    pos = end;
  }
}

}  // namespace k3::tiktoken
