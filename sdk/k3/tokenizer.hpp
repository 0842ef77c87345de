// k3host plugin SDK: tokenizers. \since ABI 1
//
// Created with the parameters of the pipeline's tokenizer section (for tiktoken: the rank
// file, the pre-tokenizer pattern, the special tokens). encode/decode are exact inverses
// for any valid UTF-8 text when special tokens are not parsed.
// Thread-safety: encode/decode may be called from several threads at once.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <k3/status.hpp>

namespace k3::sdk {

class __attribute__((visibility("default"))) Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// Number of ids (ranks + specials + reserved); every id is < vocab_size().
  [[nodiscard]] virtual std::uint32_t vocab_size() const noexcept = 0;
  /// Appends the ids of `text` to `out`. With parse_special, the text of a special token
  /// ("<|im_end|>") becomes its id; without, it is ordinary text. Invalid UTF-8 is
  /// invalid_argument naming the byte offset.
  virtual Status encode(std::string_view text, bool parse_special, std::vector<std::uint32_t>& out) noexcept = 0;
  /// Appends the bytes of `ids` to `out`. An id outside the vocabulary is invalid_argument.
  virtual Status decode(std::span<const std::uint32_t> ids, std::string& out) noexcept = 0;
  /// The id of a special token by its text; not_found if none.
  virtual Status special_id(std::string_view text, std::uint32_t& id) noexcept = 0;
};

}  // namespace k3::sdk
