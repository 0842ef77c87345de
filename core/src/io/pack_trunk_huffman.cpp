// Huffman coding of a bf16-huff block's exponent bytes (see pack_trunk_huffman.hpp).
#include "io/pack_trunk_huffman.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <queue>
#include <string>
#include <utility>

#include "io/pack_trunk_codec.hpp"
#include "util/little_endian.hpp"

namespace k3::io::trunk_codec {
namespace {

constexpr int kMaxBits = 11;
constexpr std::uint32_t kTableSize = 1u << kMaxBits;
constexpr std::size_t kLengthBytes = 128, kSectionHead = kLengthBytes + 12, kPad = 8;
constexpr std::size_t kMultiFrom = std::size_t{2} << 10;  // symbols in a block


/// Huffman code lengths of the symbols counted, at most kMaxBits: built on the counts, and
/// on ever flatter counts (halved, kept above zero) until the longest code fits.
std::array<std::uint8_t, 256> code_lengths(std::array<std::uint64_t, 256> count) {
  std::array<std::uint8_t, 256> len{};
  for (;;) {
    struct Node {
      int left, right, symbol;
    };
    std::vector<Node> nodes;
    using Item = std::pair<std::uint64_t, int>;  // (weight, node)
    std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
    for (int s = 0; s < 256; ++s)
      if (count[s] != 0) {
        nodes.push_back({-1, -1, s});
        queue.emplace(count[s], static_cast<int>(nodes.size()) - 1);
      }
    len.fill(0);
    if (nodes.empty()) return len;
    if (nodes.size() == 1) {
      len[nodes[0].symbol] = 1;
      return len;
    }
    while (queue.size() > 1) {
      const Item a = queue.top();
      queue.pop();
      const Item b = queue.top();
      queue.pop();
      nodes.push_back({a.second, b.second, -1});
      queue.emplace(a.first + b.first, static_cast<int>(nodes.size()) - 1);
    }
    int deepest = 0;
    std::vector<std::pair<int, int>> stack{{queue.top().second, 0}};
    while (!stack.empty()) {
      const auto [n, depth] = stack.back();
      stack.pop_back();
      if (nodes[n].symbol >= 0) {
        len[nodes[n].symbol] = static_cast<std::uint8_t>(depth);
        deepest = std::max(deepest, depth);
      } else {
        stack.emplace_back(nodes[n].left, depth + 1);
        stack.emplace_back(nodes[n].right, depth + 1);
      }
    }
    if (deepest <= kMaxBits) return len;
    for (auto& c : count)
      if (c != 0) c = (c + 1) / 2;
  }
}

/// Canonical codes for `len` (shorter codes first, then by symbol), bit-reversed for an
/// LSB-first stream. Returns false when the lengths over-subscribe the code space.
bool canonical_codes(const std::array<std::uint8_t, 256>& len, std::array<std::uint16_t, 256>& code) {
  std::array<std::uint32_t, kMaxBits + 2> per_length{};
  std::uint32_t kraft = 0;
  for (int s = 0; s < 256; ++s)
    if (len[s] != 0) {
      ++per_length[len[s]];
      kraft += kTableSize >> len[s];
    }
  if (kraft > kTableSize) return false;
  std::array<std::uint32_t, kMaxBits + 2> next{};
  std::uint32_t c = 0;
  for (int b = 1; b <= kMaxBits; ++b) {
    c = (c + per_length[b - 1]) << 1;
    next[b] = c;
  }
  for (int s = 0; s < 256; ++s) {
    if (len[s] == 0) continue;
    const std::uint32_t v = next[len[s]]++;
    std::uint32_t reversed = 0;
    for (int i = 0; i < len[s]; ++i) reversed |= ((v >> i) & 1u) << (len[s] - 1 - i);
    code[s] = static_cast<std::uint16_t>(reversed);
  }
  return true;
}

std::uint64_t load64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  std::memcpy(&v, p, 8);  // little-endian hosts (x86-64, aarch64), as the rest of the format
  return v;
}

}  // namespace

void huffman_encode(std::span<const std::uint8_t> symbols, std::vector<std::byte>& out) {
  std::array<std::uint64_t, 256> count{};
  for (const std::uint8_t s : symbols) ++count[s];
  const std::array<std::uint8_t, 256> len = code_lengths(count);
  std::array<std::uint16_t, 256> code{};
  (void)canonical_codes(len, code);  // Huffman lengths never over-subscribe
  const std::size_t start = out.size();
  out.resize(start + kSectionHead);
  for (int s = 0; s < 256; s += 2)
    out[start + static_cast<std::size_t>(s / 2)] = static_cast<std::byte>(len[s] | len[s + 1] << 4);
  const std::size_t n = symbols.size(), q = n / 4;
  for (std::size_t st = 0; st < 4; ++st) {
    const std::size_t begin = out.size();
    std::uint64_t acc = 0;
    int bits = 0;
    for (std::size_t i = st * q; i < (st == 3 ? n : (st + 1) * q); ++i) {
      acc |= std::uint64_t{code[symbols[i]]} << bits;
      bits += len[symbols[i]];
      while (bits >= 8) {
        out.push_back(static_cast<std::byte>(acc));
        acc >>= 8;
        bits -= 8;
      }
    }
    if (bits > 0) out.push_back(static_cast<std::byte>(acc));
    out.insert(out.end(), kPad, std::byte{0});
    const auto length = static_cast<std::uint32_t>(out.size() - begin);
    if (st < 3)
      for (int b = 0; b < 4; ++b)
        out[start + kLengthBytes + 4 * st + static_cast<std::size_t>(b)] = static_cast<std::byte>(length >> (8 * b));
  }
}

void HuffmanDecoder::decode(std::span<const std::byte> section, std::span<std::uint8_t> out) {
  if (section.size() < kSectionHead + 4 * kPad) throw CodecError("Huffman section too short");
  // Neighbouring blocks of a tensor mostly have the same code lengths: the tables are built
  // again only when they differ, the four-symbol one only for a block large enough to gain
  // from it (on fortune's small tensors, 2 Ki symbols decoded faster than 16 Ki).
  if (!single_ok_ || std::memcmp(lengths_.data(), section.data(), kLengthBytes) != 0) {
    single_ok_ = multi_ok_ = false;  // until built: a failure leaves no table to reuse
    build_single(section.first(kLengthBytes));
    std::memcpy(lengths_.data(), section.data(), kLengthBytes);
    single_ok_ = true;
  }
  const bool multi = out.size() >= kMultiFrom;
  if (multi && !multi_ok_) {
    build_multi();
    multi_ok_ = true;
  }
  decode_streams(section, out, multi);
}

void HuffmanDecoder::build_single(std::span<const std::byte> lengths) {
  std::array<std::uint8_t, 256> len{};
  for (int s = 0; s < 256; ++s) {
    len[s] = static_cast<std::uint8_t>(
        std::to_integer<unsigned>(lengths[static_cast<std::size_t>(s / 2)]) >> (4 * (s % 2)) & 15u);
    if (len[s] > kMaxBits) throw CodecError("Huffman code length " + std::to_string(len[s]) + " over 11");
  }
  std::array<std::uint16_t, 256> code{};
  if (!canonical_codes(len, code)) throw CodecError("Huffman code lengths over-subscribe the code");
  single_.resize(kTableSize);  // allocated once
  std::fill(single_.begin(), single_.end(), Entry{});
  for (int s = 0; s < 256; ++s)
    if (len[s] != 0)
      for (std::uint32_t i = code[s]; i < kTableSize; i += 1u << len[s])
        single_[i] = {static_cast<std::uint32_t>(s), 1, len[s]};
}

void HuffmanDecoder::build_multi() {
  // Up to four symbols per entry: those whose codes fit, one after the other, in its 11 bits.
  table_.resize(kTableSize);  // allocated once
  for (std::uint32_t i = 0; i < kTableSize; ++i) {
    Entry e{};
    while (e.count < 4) {
      const int rest = kMaxBits - e.bits;
      const Entry& next = single_[(i >> e.bits) & ((1u << rest) - 1)];
      if (next.count == 0 || next.bits > rest) break;
      e.symbols |= next.symbols << (8 * e.count);
      ++e.count;
      e.bits = static_cast<std::uint8_t>(e.bits + next.bits);
    }
    table_[i] = e;
  }
}

void HuffmanDecoder::decode_streams(std::span<const std::byte> section, std::span<std::uint8_t> out, bool multi) {
  // The four streams.
  std::array<std::size_t, 4> length{};
  std::size_t total = 0;
  for (std::size_t st = 0; st < 3; ++st) {
    length[st] = util::load_le32(section.data() + kLengthBytes + 4 * st);
    total += length[st];
    if (length[st] < kPad || total > section.size() - kSectionHead) throw CodecError("bad Huffman stream length");
  }
  length[3] = section.size() - kSectionHead - total;
  if (length[3] < kPad) throw CodecError("bad Huffman stream length");
  std::array<const std::uint8_t*, 4> src{};
  std::array<std::uint64_t, 4> pos{}, safe{};  // bit positions; loads stay inside while pos <= safe
  std::array<std::uint8_t*, 4> dst{}, end{};
  const std::size_t n = out.size(), q = n / 4;
  std::size_t at = kSectionHead;
  for (std::size_t st = 0; st < 4; ++st) {
    src[st] = reinterpret_cast<const std::uint8_t*>(section.data() + at);
    at += length[st];
    safe[st] = 8 * (length[st] - kPad);
    dst[st] = out.data() + st * q;
    end[st] = out.data() + (st == 3 ? n : (st + 1) * q);
  }

  const Entry* table = table_.data();
  constexpr std::uint64_t kMask = kTableSize - 1;
  while (multi) {
    // Steps every stream can take: each writes 4 bytes (keeps at most 4) and consumes at most
    // 11 bits, so both its output and its 8-byte loads stay inside.
    std::uint64_t steps = UINT64_MAX;
    for (std::size_t st = 0; st < 4; ++st) {
      steps = std::min<std::uint64_t>(steps, static_cast<std::uint64_t>(end[st] - dst[st]) / 4);
      steps = std::min<std::uint64_t>(steps, pos[st] > safe[st] ? 0 : (safe[st] - pos[st]) / kMaxBits);
    }
    if (steps < 2) break;
    const std::uint8_t *s0 = src[0], *s1 = src[1], *s2 = src[2], *s3 = src[3];
    std::uint64_t p0 = pos[0], p1 = pos[1], p2 = pos[2], p3 = pos[3];
    std::uint8_t *o0 = dst[0], *o1 = dst[1], *o2 = dst[2], *o3 = dst[3];
    for (std::uint64_t k = 0; k < steps; ++k) {
      const Entry e0 = table[(load64(s0 + (p0 >> 3)) >> (p0 & 7)) & kMask];
      const Entry e1 = table[(load64(s1 + (p1 >> 3)) >> (p1 & 7)) & kMask];
      const Entry e2 = table[(load64(s2 + (p2 >> 3)) >> (p2 & 7)) & kMask];
      const Entry e3 = table[(load64(s3 + (p3 >> 3)) >> (p3 & 7)) & kMask];
      std::memcpy(o0, &e0.symbols, 4);
      std::memcpy(o1, &e1.symbols, 4);
      std::memcpy(o2, &e2.symbols, 4);
      std::memcpy(o3, &e3.symbols, 4);
      o0 += e0.count, o1 += e1.count, o2 += e2.count, o3 += e3.count;
      p0 += e0.bits, p1 += e1.bits, p2 += e2.bits, p3 += e3.bits;
    }
    // An entry with no code (count 0) makes no progress: the tail below reports it.
    const bool stuck = o0 == dst[0] || o1 == dst[1] || o2 == dst[2] || o3 == dst[3];
    pos = {p0, p1, p2, p3};
    dst = {o0, o1, o2, o3};
    if (stuck) break;
  }
  // The rest one symbol at a time, every load checked.
  for (std::size_t st = 0; st < 4; ++st) {
    while (dst[st] < end[st]) {
      if ((pos[st] >> 3) + 8 > length[st]) throw CodecError("Huffman stream " + std::to_string(st) + " ends early");
      const Entry& e = single_[(load64(src[st] + (pos[st] >> 3)) >> (pos[st] & 7)) & kMask];
      if (e.count == 0) throw CodecError("Huffman stream " + std::to_string(st) + ": no such code");
      *dst[st]++ = static_cast<std::uint8_t>(e.symbols);
      pos[st] += e.bits;
    }
    if (pos[st] > safe[st]) throw CodecError("Huffman stream " + std::to_string(st) + " runs past its end");
  }
}

}  // namespace k3::io::trunk_codec
