// Rank BPE on a hand-made rank file, with expectations worked out by hand from tiktoken's
// rule: merge the lowest-rank adjacent pair (leftmost on ties) until none is a token.
#include <catch2/catch.hpp>

#include "tokenizer_fixture.hpp"

using namespace k3::test;

namespace {

// Ranks: bytes 0..255, then 256 "bc", 257 "ab", 258 "abc", 259 "cd", 260 "bcd", 261 "aa",
// 262 "xyz" (no "xy"/"yz" merges), 263 "aaaa".
const std::vector<std::string> kMerges = {"bc", "ab", "abc", "cd", "bcd", "aa", "xyz", "aaaa"};

std::shared_ptr<k3::sdk::Tokenizer> whole_text_as_one_piece() {
  // One piece per text: the pre-tokenizer takes everything, so only BPE decides.
  return make_tokenizer({{"model", rank_file("bpe.tiktoken", kMerges).string()}, {"pattern", "regex:(?s:.+)"}});
}

}  // namespace

TEST_CASE("bpe: the lowest-rank pair merges first, then its neighbours are re-ranked") {
  auto t = whole_text_as_one_piece();
  // abcd: pairs ab 257, bc 256, cd 259 -> bc first: a|bc|d; then a+bc = abc 258 beats
  // bc+d = bcd 260 -> abc|d; abcd is no token.
  CHECK(encode(*t, "abcd") == std::vector<std::uint32_t>{258, byte_id('d')});
  // bcd: bc 256 first -> bc|d, then bcd 260.
  CHECK(encode(*t, "bcd") == std::vector<std::uint32_t>{260});
  // dab: only ab 257 -> d|ab.
  CHECK(encode(*t, "dab") == std::vector<std::uint32_t>{byte_id('d'), 257});
}

TEST_CASE("bpe: equal ranks merge leftmost first") {
  auto t = whole_text_as_one_piece();
  // aaa: aa@0 and aa@1 both 261; leftmost -> aa|a (rightmost would give a|aa).
  CHECK(encode(*t, "aaa") == std::vector<std::uint32_t>{261, byte_id('a')});
}

TEST_CASE("bpe: a piece that is itself a token is that token, even without merges leading to it") {
  auto t = whole_text_as_one_piece();
  CHECK(encode(*t, "xyz") == std::vector<std::uint32_t>{262});
  // Inside a longer piece the shortcut does not apply: no pair of xyzx is a token.
  CHECK(encode(*t, "xyzx") == std::vector<std::uint32_t>{byte_id('x'), byte_id('y'), byte_id('z'), byte_id('x')});
}

TEST_CASE("bpe: long pieces (heap path) merge exactly like short ones (scan path)") {
  auto t = whole_text_as_one_piece();
  // n a's: all aa (261) merges come before any aaaa (263): n/2 aa parts, then pairs of those
  // become aaaa left to right. 62 bytes take the scan path, 100 and 102 the heap path.
  auto expect = [](std::size_t n) {
    std::vector<std::uint32_t> ids(n / 4, 263);
    if (n % 4 >= 2) ids.push_back(261);
    if (n % 2 == 1) ids.push_back(byte_id('a'));
    return ids;
  };
  for (std::size_t n : {62u, 63u, 64u, 100u, 102u, 103u, 4001u}) {
    INFO("n = " << n);
    CHECK(encode(*t, std::string(n, 'a')) == expect(n));
  }
  // Mixed long piece: (abcd)x20 -> each abcd is abc|d as above, since no merge crosses d|a.
  std::string text;
  std::vector<std::uint32_t> ids;
  for (int i = 0; i < 20; ++i) {
    text += "abcd";
    ids.push_back(258);
    ids.push_back(byte_id('d'));
  }
  CHECK(encode(*t, text) == ids);
}

TEST_CASE("bpe: pieces are encoded separately (no merge crosses a pre-token boundary)") {
  auto t = make_tokenizer({{"model", rank_file("bpe2.tiktoken", kMerges).string()}, {"pattern", "cl100k"}});
  // cl100k splits "ab cd" into "ab" and " cd"; " cd" has pairs " c" (none) and cd 259.
  CHECK(encode(*t, "ab cd") == std::vector<std::uint32_t>{257, byte_id(' '), 259});
  // One word: the merges of the earlier case apply inside it.
  CHECK(encode(*t, "abcd") == std::vector<std::uint32_t>{258, byte_id('d')});
}
