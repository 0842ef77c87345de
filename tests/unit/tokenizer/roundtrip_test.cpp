// decode(encode(x)) == x for any valid UTF-8 when special tokens are not parsed, with every
// pattern preset, random text from many scripts, and Kimi's text cuts at tiny limits.
#include <catch2/catch.hpp>

#include <random>
#include <thread>

#include "tokenizer_fixture.hpp"

using namespace k3::test;

namespace {

void append_utf8(std::string& s, char32_t c) {
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Random text: runs drawn from ranges that exercise every branch of the patterns.
std::string random_text(std::mt19937& rng, std::size_t code_points) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E},       {0x09, 0x0D},       {0x20, 0x20},     {0x30, 0x39},       {0x41, 0x5A},     {0x61, 0x7A},
      {0x80, 0x10FF},     {0x0300, 0x036F},   {0x0590, 0x06FF}, {0x0900, 0x097F},   {0x1680, 0x1680}, {0x180E, 0x180E},
      {0x2000, 0x206F},   {0x3000, 0x303F},   {0x3040, 0x30FF}, {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3}, {0xFE00, 0xFEFF},
      {0x1F300, 0x1FAFF}, {0x20000, 0x2A6DF}, {0xE000, 0xE0FF}, {0x10000, 0x10FFFF}};
  std::uniform_int_distribution<std::size_t> pick(0, ranges.size() - 1);
  std::string s;
  std::size_t n = 0;
  while (n < code_points) {
    const auto [lo, hi] = ranges[pick(rng)];
    std::uniform_int_distribution<std::uint32_t> cp(lo, hi);
    std::uniform_int_distribution<int> run(1, 12);
    for (int k = run(rng); k > 0 && n < code_points; --k) {
      char32_t c = cp(rng);
      if (c >= 0xD800 && c <= 0xDFFF) c = 0xFFFD;  // surrogates are not scalar values
      append_utf8(s, c);
      ++n;
    }
  }
  return s;
}

}  // namespace

TEST_CASE("roundtrip: decode(encode(x)) == x for random UTF-8 with every preset") {
  const auto model = rank_file("rt.tiktoken", {"  ", "    ", "e ", "th", "the", "\xe4\xb8", "\xf0\x9f", "12", "ab"});
  std::mt19937 rng(20261129);
  for (const char* pattern : {"kimi", "cl100k", "o200k"}) {
    auto t = make_tokenizer({{"model", model.string()}, {"pattern", pattern}, {"specials", "<|end|>=300"}});
    for (int i = 0; i < 200; ++i) {
      std::string text = random_text(rng, 1 + static_cast<std::size_t>(i) * 3);
      if (i % 10 == 0) text += "<|end|>";  // special text is ordinary text when not parsed
      INFO("pattern " << pattern << ", sample " << i);
      const auto ids = encode(*t, text);
      for (const auto id : ids) REQUIRE(id < t->vocab_size());
      if (i % 10 == 0) CHECK(std::find(ids.begin(), ids.end(), 300u) == ids.end());
      REQUIRE(decode(*t, ids) == text);
    }
  }
}

TEST_CASE("roundtrip: Kimi's text cuts keep the round trip and change ids only at the cuts") {
  const auto model = rank_file("rt2.tiktoken", {"aa", "aaaa", "  ", "    "});
  std::mt19937 rng(7);
  auto cut = make_tokenizer(
      {{"model", model.string()}, {"pattern", "kimi"}, {"max_chunk_chars", "13"}, {"max_run_chars", "5"}});
  for (int i = 0; i < 100; ++i) {
    const std::string text = random_text(rng, 40);
    REQUIRE(decode(*cut, encode(*cut, text)) == text);
  }
  // 12 a's under a run limit of 5 become runs 5+5+2, each encoded alone:
  // aaaa|a, aaaa|a, aa (ranks 257, 'a', 257, 'a', 256).
  CHECK(encode(*cut, std::string(12, 'a')) == std::vector<std::uint32_t>{257, 'a', 257, 'a', 256});
  auto uncut = make_tokenizer(
      {{"model", model.string()}, {"pattern", "kimi"}, {"max_chunk_chars", "0"}, {"max_run_chars", "0"}});
  CHECK(encode(*uncut, std::string(12, 'a')) == std::vector<std::uint32_t>{257, 257, 257});
}

TEST_CASE("roundtrip: concurrent encodes on one tokenizer give the same ids") {
  auto t = make_tokenizer({{"model", rank_file("rt3.tiktoken", {"th", "he", "the"}).string()}, {"pattern", "kimi"}});
  std::mt19937 rng(3);
  std::vector<std::string> texts;
  for (int i = 0; i < 50; ++i) texts.push_back(random_text(rng, 200));
  std::vector<std::vector<std::uint32_t>> serial;
  for (const auto& s : texts) serial.push_back(encode(*t, s));
  std::vector<std::vector<std::uint32_t>> a(texts.size()), b(texts.size());
  std::thread ta([&] {
    for (std::size_t i = 0; i < texts.size(); ++i) a[i] = encode(*t, texts[i]);
  });
  std::thread tb([&] {
    for (std::size_t i = texts.size(); i-- > 0;) b[i] = encode(*t, texts[i]);
  });
  ta.join();
  tb.join();
  CHECK(a == serial);
  CHECK(b == serial);
}
