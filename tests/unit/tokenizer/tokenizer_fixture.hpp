// Helpers for the tiktoken plugin tests: hand-made rank files in a private scratch folder
// and tokenizers created through the real plugin host (as k3host does).
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <k3/plugin_host.hpp>
#include <k3/tokenizer.hpp>

namespace k3::test {

inline std::filesystem::path tokenizer_scratch() {
  const char* env = std::getenv("K3_TEST_TMP");
  std::filesystem::path dir = env != nullptr ? env : (std::filesystem::path(K3_BINARY_DIR) / "test-tmp");
  dir /= "tokenizer-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::filesystem::path write_file(const std::string& name, const std::string& content) {
  const auto path = tokenizer_scratch() / name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

/// Base64 written independently of the plugin's decoder (standard alphabet, '=' padding).
inline std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += {abc[(v >> 18) & 63], abc[(v >> 12) & 63], abc[(v >> 6) & 63], abc[v & 63]};
  }
  if (bytes.size() - i == 1) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    out += {abc[(v >> 18) & 63], abc[(v >> 12) & 63], '=', '='};
  } else if (bytes.size() - i == 2) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8);
    out += {abc[(v >> 18) & 63], abc[(v >> 12) & 63], abc[(v >> 6) & 63], '='};
  }
  return out;
}

/// A rank file: every single byte b has rank b (unless `skip_byte` names one to leave out),
/// then `merges` in order get ranks 256, 257, ...
inline std::filesystem::path rank_file(const std::string& name, const std::vector<std::string>& merges,
                                       int skip_byte = -1) {
  std::string text;
  for (int b = 0; b < 256; ++b)
    if (b != skip_byte) text += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  for (std::size_t i = 0; i < merges.size(); ++i) text += base64(merges[i]) + " " + std::to_string(256 + i) + "\n";
  return write_file(name, text);
}

/// The plugin host, created once per process: it keeps the library loaded. The tokenizer
/// reads its files through HostServices::read_file, here a posix backend (as k3host's
/// default pipeline).
inline PluginHost& host() {
  static PluginHost h;
  static const std::shared_ptr<sdk::StorageBackend> files = [] {
    auto s = h.create_storage("posix", {});
    h.set_file_storage(s);
    return s;
  }();
  return h;
}

inline std::shared_ptr<sdk::Tokenizer> make_tokenizer(const PluginParams& params) {
  return host().create_tokenizer("tiktoken", params);
}

inline std::vector<std::uint32_t> encode(sdk::Tokenizer& t, const std::string& text, bool special = false) {
  std::vector<std::uint32_t> ids;
  const sdk::Status st = t.encode(text, special, ids);
  if (!st.ok()) throw std::runtime_error("encode: " + st.detail);
  return ids;
}

inline std::string decode(sdk::Tokenizer& t, const std::vector<std::uint32_t>& ids) {
  std::string out;
  const sdk::Status st = t.decode(ids, out);
  if (!st.ok()) throw std::runtime_error("decode: " + st.detail);
  return out;
}

inline std::uint32_t byte_id(char c) { return static_cast<unsigned char>(c); }

}  // namespace k3::test
