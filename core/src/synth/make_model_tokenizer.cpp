// The synthetic tokenizer: a byte-level BPE trained deterministically on the embedded sample
// (make_model_corpus.cpp), written as a tiktoken rank file, plus tokenizer_config.json with
// the K3 special tokens at ids ranks+0..255 (as tokenization_kimi.py of the release names them).
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include <k3/error.hpp>
#include <k3/make_model.hpp>

#include "synth/make_model_parts.hpp"

namespace k3 {
namespace detail {
namespace {

// ---- pre-tokenisation: a byte-level approximation of the Kimi pattern (words with one
// leading space or mark, 1–3 digit runs, punctuation runs, whitespace runs), so merges stay
// inside the pieces the real pattern produces. Bytes >= 0x80 count as letters, so a UTF-8
// character is never split between pieces.
enum class Cls { letter, digit, space, newline, other };

Cls classify(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return Cls::letter;
  if (c >= '0' && c <= '9') return Cls::digit;
  if (c == ' ' || c == '\t') return Cls::space;
  if (c == '\n' || c == '\r') return Cls::newline;
  return Cls::other;
}

std::vector<std::string_view> pre_tokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  const auto cls = [&](std::size_t i) { return classify(static_cast<unsigned char>(text[i])); };
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const std::size_t start = i;
    const Cls c = cls(i);
    const Cls next = i + 1 < n ? cls(i + 1) : Cls::newline;
    if (c == Cls::letter || ((c == Cls::space || c == Cls::other) && next == Cls::letter)) {
      if (c != Cls::letter) ++i;
      while (i < n && cls(i) == Cls::letter) ++i;
    } else if (c == Cls::digit) {
      while (i < n && i - start < 3 && cls(i) == Cls::digit) ++i;
    } else if (c == Cls::other || (c == Cls::space && text[i] == ' ' && next == Cls::other)) {
      if (c == Cls::space) ++i;
      while (i < n && cls(i) == Cls::other) ++i;
      while (i < n && cls(i) == Cls::newline) ++i;
    } else {
      while (i < n && (cls(i) == Cls::space || cls(i) == Cls::newline)) ++i;
      // Leave one space to lead the next word or mark (the pattern's \s+(?!\S)).
      if (i < n && i - start > 1 && text[i - 1] == ' ' && cls(i) != Cls::space) --i;
    }
    if (i == start) ++i;
    pieces.push_back(text.substr(start, i - start));
  }
  return pieces;
}

struct Word {
  std::vector<std::int32_t> symbols;
  std::int64_t count = 0;
};

std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

// Learns merges until `ranks` tokens exist (or no pair is left), most frequent pair first,
// ties to the lowest (left id, right id): the same ranks on every host.
std::vector<std::string> train_bpe(std::string_view text, std::int64_t ranks) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  std::map<std::string_view, std::int64_t> piece_counts;
  for (auto p : pre_tokenize(text)) ++piece_counts[p];
  std::vector<Word> words;
  for (const auto& [piece, count] : piece_counts) {
    Word w;
    w.count = count;
    for (char ch : piece) w.symbols.push_back(static_cast<unsigned char>(ch));
    words.push_back(std::move(w));
  }
  std::unordered_map<std::uint64_t, std::int64_t> pairs;
  for (const auto& w : words)
    for (std::size_t i = 0; i + 1 < w.symbols.size(); ++i) pairs[pair_key(w.symbols[i], w.symbols[i + 1])] += w.count;
  std::unordered_map<std::string, std::int32_t> by_bytes;
  for (std::int32_t i = 0; i < 256; ++i) by_bytes.emplace(tokens[static_cast<std::size_t>(i)], i);

  while (static_cast<std::int64_t>(tokens.size()) < ranks) {
    std::uint64_t best = 0;
    std::int64_t best_count = 0;
    for (const auto& [key, count] : pairs)
      if (count > best_count || (count == best_count && count > 0 && key < best)) {
        best = key;
        best_count = count;
      }
    if (best_count <= 0) break;
    const auto a = static_cast<std::int32_t>(best >> 32), b = static_cast<std::int32_t>(best & 0xffffffffu);
    std::string bytes = tokens[static_cast<std::size_t>(a)] + tokens[static_cast<std::size_t>(b)];
    std::int32_t merged;
    if (auto it = by_bytes.find(bytes); it != by_bytes.end()) {
      merged = it->second;  // the same bytes reached by another split: no new rank
    } else {
      merged = static_cast<std::int32_t>(tokens.size());
      tokens.push_back(bytes);
      by_bytes.emplace(std::move(bytes), merged);
    }
    auto bump = [&](std::int32_t x, std::int32_t y, std::int64_t d) {
      auto& v = pairs[pair_key(x, y)];
      v += d;
      if (v == 0) pairs.erase(pair_key(x, y));
    };
    for (auto& w : words) {
      auto& s = w.symbols;
      for (std::size_t i = 0; i + 1 < s.size();) {
        if (s[i] != a || s[i + 1] != b) {
          ++i;
          continue;
        }
        if (i > 0) {
          bump(s[i - 1], a, -w.count);
          bump(s[i - 1], merged, w.count);
        }
        if (i + 2 < s.size()) {
          bump(b, s[i + 2], -w.count);
          bump(merged, s[i + 2], w.count);
        }
        bump(a, b, -w.count);
        s[i] = merged;
        s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) + 1);
        ++i;
      }
    }
  }
  return tokens;
}

std::string base64(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const std::uint32_t v = (static_cast<unsigned char>(in[i]) << 16) | (static_cast<unsigned char>(in[i + 1]) << 8) |
                            static_cast<unsigned char>(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  if (const std::size_t rest = in.size() - i; rest > 0) {
    std::uint32_t v = static_cast<std::uint32_t>(static_cast<unsigned char>(in[i])) << 16;
    if (rest == 2) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// K3's named specials by slot (id - ranks); every other slot is <|reserved_token_{id}|>.
const std::map<int, const char*>& named_specials() {
  static const std::map<int, const char*> names = {
      {0, "[BOS]"},
      {1, "[EOS]"},
      {2, "<|end_of_msg|>"},
      {3, "<|open|>"},
      {4, "<|close|>"},
      {5, "<|sep|>"},
      {6, "<|start_header_id|>"},
      {7, "<|end_header_id|>"},
      {9, "[EOT]"},
      {10, "<|im_system|>"},
      {11, "<|tool_calls_section_begin|>"},
      {12, "<|tool_calls_section_end|>"},
      {13, "<|tool_call_begin|>"},
      {14, "<|tool_call_argument_begin|>"},
      {15, "<|tool_call_end|>"},
      {17, "<|im_middle|>"},
      {18, "<|media_begin|>"},
      {19, "<|media_content|>"},
      {20, "<|media_end|>"},
      {21, "<|media_pad|>"},
      {22, "<think>"},
      {23, "</think>"},
      {254, "[UNK]"},
      {255, "[PAD]"},
  };
  return names;
}

}  // namespace

std::string special_token_name(std::int64_t ranks, int slot) {
  const auto& named = named_specials();
  if (auto it = named.find(slot); it != named.end()) return it->second;
  return "<|reserved_token_" + std::to_string(ranks + slot) + "|>";
}

std::string make_tokenizer_config_json(std::int64_t ranks) {
  std::string j = "{\n  \"added_tokens_decoder\": {\n";
  for (int slot = 0; slot < 256; ++slot) {
    j += "    \"" + std::to_string(ranks + slot) + "\": {\"content\": \"" + special_token_name(ranks, slot) +
         "\", \"lstrip\": false, \"normalized\": false, \"rstrip\": false, \"single_word\": false, \"special\": true}";
    j += slot < 255 ? ",\n" : "\n";
  }
  j += "  },\n  \"additional_special_tokens\": [";
  bool first = true;
  for (const auto& [slot, name] : named_specials()) {
    j += std::string(first ? "" : ", ") + "\"" + name + "\"";
    first = false;
  }
  j += "],\n";
  j += "  \"bos_token\": \"[BOS]\",\n  \"eos_token\": \"<|end_of_msg|>\",\n  \"pad_token\": \"[PAD]\",\n"
       "  \"unk_token\": \"[UNK]\",\n  \"clean_up_tokenization_spaces\": false,\n"
       "  \"model_max_length\": 1048576,\n  \"tokenizer_class\": \"TikTokenTokenizer\",\n"
       "  \"auto_map\": {\"AutoTokenizer\": [\"tokenization_kimi.TikTokenTokenizer\", null]}\n}\n";
  return j;
}

}  // namespace detail

std::string make_tiktoken_ranks(std::int64_t ranks) {
  if (ranks < 256)
    throw UsageError("tokenizer: at least 256 ranks (the single bytes) are needed, got " + std::to_string(ranks));
  auto tokens = detail::train_bpe(detail::bpe_training_text(), ranks);
  // The sample saturates after a few thousand merges. A larger table (the full K3 has
  // 163,584 ranks) is filled with 4-byte tokens led by 0xF8, a byte that never occurs in
  // UTF-8, so they are valid ranks that ordinary text never produces.
  for (std::uint32_t i = 0; static_cast<std::int64_t>(tokens.size()) < ranks; ++i) {
    if (i >= (1u << 18)) throw UsageError("tokenizer: " + std::to_string(ranks) + " ranks is more than supported");
    tokens.push_back(std::string{static_cast<char>(0xF8), static_cast<char>(0x80 | ((i >> 12) & 0x3F)),
                                 static_cast<char>(0x80 | ((i >> 6) & 0x3F)), static_cast<char>(0x80 | (i & 0x3F))});
  }
  std::string out;
  out.reserve(tokens.size() * 12);
  for (std::size_t r = 0; r < tokens.size(); ++r) out += detail::base64(tokens[r]) + " " + std::to_string(r) + "\n";
  return out;
}

}  // namespace k3
