#include "tiktoken_tokenizer.hpp"

#include <algorithm>
#include <exception>
#include <new>

#include "bpe.hpp"
#include "tokenizer_error.hpp"
#include "utf8.hpp"

namespace k3::tiktoken {

using sdk::Status;
using sdk::StatusCode;

struct EncodeScratch {
  std::vector<std::string_view> chunks;
  std::vector<std::string_view> pieces;
  BpeScratch bpe;
};

namespace {

// Runs `body` and turns whatever it throws into a Status: nothing crosses the boundary.
template <class Body>
Status guarded(Body&& body) noexcept {
  try {
    body();
    return Status::success();
  } catch (const TokenizerError& e) {
    return Status::error(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return Status::error(StatusCode::out_of_memory, "tiktoken: out of memory");
  } catch (const std::exception& e) {
    return Status::error(StatusCode::internal, e.what());
  } catch (...) {
    return Status::error(StatusCode::internal, "tiktoken: unknown exception");
  }
}

}  // namespace

TiktokenTokenizer::TiktokenTokenizer(TiktokenConfig config)
    : ranks_(std::move(config.ranks)),
      specials_(std::move(config.specials)),
      limits_(config.limits),
      pattern_(config.pattern, true, "pattern") {
  vocab_size_ = ranks_.end();
  for (const auto& [id, text] : specials_.by_id()) {
    if (id < ranks_.end() && !ranks_.bytes_of(id).empty())
      fail(StatusCode::invalid_argument,
           "special token '" + text + "' has id " + std::to_string(id) + ", which is a rank in the rank file");
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
}

void TiktokenTokenizer::encode_ordinary(std::string_view segment, MatchScratch& scratch, EncodeScratch& work,
                                        std::vector<std::uint32_t>& out) const {
  work.pieces.clear();
  split_pieces(pattern_, segment, scratch, work.pieces);
  for (const std::string_view piece : work.pieces) byte_pair_encode(ranks_, piece, work.bpe, out);
}

Status TiktokenTokenizer::encode(std::string_view text, bool parse_special, std::vector<std::uint32_t>& out) noexcept {
  return guarded([&] {
    if (const std::size_t bad = find_invalid_utf8(text); bad != kValidUtf8)
      fail(StatusCode::invalid_argument, "invalid UTF-8 at byte offset " + std::to_string(bad));
    MatchScratch scratch;
    EncodeScratch work;
    std::vector<std::uint32_t> ids;  // appended to `out` only when the whole text encoded
    ids.reserve(text.size() / 3 + 1);
    split_for_encoding(text, limits_, work.chunks);
    for (const std::string_view chunk : work.chunks) {
      if (!parse_special || specials_.empty()) {
        encode_ordinary(chunk, scratch, work, ids);
        continue;
      }
      // As tiktoken: the ordinary text between special tokens is pre-tokenized on its own.
      std::size_t pos = 0, begin = 0, end = 0;
      std::uint32_t id = 0;
      while (specials_.find_in(chunk, pos, scratch, begin, end, id)) {
        encode_ordinary(chunk.substr(pos, begin - pos), scratch, work, ids);
        ids.push_back(id);
        pos = end;
      }
      encode_ordinary(chunk.substr(pos), scratch, work, ids);
    }
    out.insert(out.end(), ids.begin(), ids.end());
  });
}

Status TiktokenTokenizer::decode(std::span<const std::uint32_t> ids, std::string& out) noexcept {
  return guarded([&] {
    std::string text;  // appended to `out` only when every id decoded
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::uint32_t id = ids[i];
      if (const std::string_view bytes = ranks_.bytes_of(id); !bytes.empty()) {
        text.append(bytes);
      } else if (const std::string* special = specials_.text_of(id)) {
        text.append(*special);
      } else {
        fail(StatusCode::invalid_argument, "id " + std::to_string(id) + " at position " + std::to_string(i) +
                                               " is not in the vocabulary (size " + std::to_string(vocab_size_) + ")");
      }
    }
    out += text;
  });
}

Status TiktokenTokenizer::special_id(std::string_view text, std::uint32_t& id) noexcept {
  return guarded([&] {
    if (!specials_.find_id(text, id)) fail(StatusCode::not_found, "no special token '" + std::string(text) + "'");
  });
}

}  // namespace k3::tiktoken
