// The chat tests' tokenizer: the tiny synthetic checkpoint's own (tiktoken.model and
// tokenizer_config.json written by make-model), loaded through the real tiktoken plugin.
// configs/models/tiny.yaml has 512 ranks, so the K3 specials sit at 512 + slot:
// [BOS] 512, [EOS] 513, <|end_of_msg|> 514, <|open|> 515, <|close|> 516, <|sep|> 517.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <k3/chat.hpp>
#include <k3/plugin_host.hpp>

#include "test_models.hpp"

namespace k3::test {

inline constexpr std::uint32_t kBos = 512, kEos = 513, kEom = 514, kOpenId = 515, kCloseId = 516, kSepId = 517;

inline sdk::Tokenizer& chat_tokenizer() {
  static PluginHost host;
  static ScratchCleanup cleanup;
  // The tokenizer reads its files through HostServices::read_file: a posix backend, as the
  // default pipeline's.
  static const std::shared_ptr<sdk::StorageBackend> files = [] {
    auto s = host.create_storage("posix", {});
    host.set_file_storage(s);
    return s;
  }();
  static std::shared_ptr<sdk::Tokenizer> tok = [] {
    const auto& dir = test_model("tiny");
    return host.create_tokenizer("tiktoken", {{"model", (dir / "tiktoken.model").string()},
                                              {"config", (dir / "tokenizer_config.json").string()},
                                              {"pattern", "kimi"}});
  }();
  return *tok;
}

inline const chat::ChatTokens& chat_tokens() {
  static chat::ChatTokens t(chat_tokenizer());
  return t;
}

inline std::vector<std::uint32_t> plain_ids(const std::string& text) {
  std::vector<std::uint32_t> ids;
  const sdk::Status st = chat_tokenizer().encode(text, false, ids);
  if (!st.ok()) throw std::runtime_error("encode: " + st.detail);
  return ids;
}

/// Ids built by hand: text pieces (specials off) and control ids, in order.
struct Ids {
  std::vector<std::uint32_t> v;
  Ids& text(const std::string& s) {
    const auto ids = plain_ids(s);
    v.insert(v.end(), ids.begin(), ids.end());
    return *this;
  }
  Ids& id(std::uint32_t x) {
    v.push_back(x);
    return *this;
  }
  Ids& open(const std::string& header) { return id(kOpenId).text(header).id(kSepId); }
  Ids& close(const std::string& tag) { return id(kCloseId).text(tag).id(kSepId); }
};

}  // namespace k3::test
