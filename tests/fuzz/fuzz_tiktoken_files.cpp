// The tiktoken plugin's files: the rank file (tiktoken.model), tokenizer_config.json's
// added_tokens_decoder and the inline `specials` parameter, built into a tokenizer as the
// plugin's factory does. Input: the three texts separated by NUL bytes. A refusal is
// TokenizerError. Oracle: a tokenizer built encodes a fixed sample whose every byte has a
// rank (when all 256 single bytes do) and decodes it back to the sample.
#include "fuzz_support.hpp"
#include "tiktoken_build.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = k3::fuzz::split(k3::fuzz::as_text(data, size), std::string_view("\0", 1), 3);
  const std::string ranks(parts[0]), config(parts.size() > 1 ? parts[1] : ""),
      specials(parts.size() > 2 ? parts[2] : "");
  k3::fuzz::guarded<k3::tiktoken::TokenizerError>([&] {
    const auto tok = k3::fuzz::build_tiktoken(ranks, config, specials);
    const std::string sample = "Hello, world! 123 ünïcødé\n\tend <|im_end|>";
    std::vector<std::uint32_t> ids;
    const auto st = tok->encode(sample, true, ids);
    k3::fuzz::check(st.ok() || k3::fuzz::is_refusal(st), "encode failed inside: " + st.detail);
    if (!st.ok()) return;
    for (auto id : ids) k3::fuzz::check(id < tok->vocab_size(), "an id outside the vocabulary");
    std::string text;
    const auto dt = tok->decode(ids, text);
    k3::fuzz::check(dt.ok(), "the ids encode gave do not decode: " + dt.detail);
    k3::fuzz::check(text == sample, "decode(encode(sample)) != sample");
  });
  return 0;
}
