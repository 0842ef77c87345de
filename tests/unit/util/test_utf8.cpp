// util::whole_utf8_prefix, the one rule that holds back an unfinished UTF-8 character when
// generated text streams out: every 2-, 3- and 4-byte character cut at every byte, alone and
// after text, and the bytes that must never be held.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "util/utf8.hpp"

using k3::util::whole_utf8_prefix;

TEST_CASE("whole_utf8_prefix holds back a 2-, 3- or 4-byte character cut at any byte", "[util][utf8]") {
  // "é" (2 bytes), "€" (3), "😀" (4).
  for (const std::string& ch :
       {std::string("\xC3\xA9"), std::string("\xE2\x82\xAC"), std::string("\xF0\x9F\x98\x80")}) {
    for (const std::string& before :
         {std::string(), std::string("ab"), std::string("\xC3\xA9"), std::string("\xF0\x9F\x98\x80")}) {
      for (std::size_t cut = 0; cut <= ch.size(); ++cut) {
        const std::string text = before + ch.substr(0, cut);
        CAPTURE(ch.size(), before.size(), cut);
        // A whole character (or none of it) is sent; a part of one waits for the rest.
        const std::size_t want = cut == 0 || cut == ch.size() ? text.size() : before.size();
        CHECK(whole_utf8_prefix(text) == want);
      }
      // Whole characters after it are sent too.
      CHECK(whole_utf8_prefix(before + ch + "z") == before.size() + ch.size() + 1);
    }
  }
}

TEST_CASE("whole_utf8_prefix never holds bytes that cannot become UTF-8", "[util][utf8]") {
  CHECK(whole_utf8_prefix("") == 0);
  CHECK(whole_utf8_prefix("abc") == 3);
  // Stray continuation bytes, up to four in a row.
  CHECK(whole_utf8_prefix("a\x80") == 2);
  CHECK(whole_utf8_prefix("a\x80\x80\x80") == 4);
  CHECK(whole_utf8_prefix("a\x80\x80\x80\x80") == 5);
  // A 3-byte lead followed by three continuations is not a character in the making.
  CHECK(whole_utf8_prefix("\xE2\x82\xAC\x80") == 4);
  // Bytes that cannot lead a sequence: F8..FF.
  for (const char b : {'\xF8', '\xFB', '\xFC', '\xFE', '\xFF'}) {
    const std::string text = std::string("a") + b;
    CAPTURE(static_cast<int>(static_cast<unsigned char>(b)));
    CHECK(whole_utf8_prefix(text) == 2);
  }
}
