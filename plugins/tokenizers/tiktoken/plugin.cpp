// Registration of the tiktoken tokenizer and its parameters (README.md lists them).
#include <k3/host.hpp>
#include <k3/plugin.hpp>

#include "tiktoken_tokenizer.hpp"
#include "tokenizer_error.hpp"

namespace k3::tiktoken {

namespace {

using sdk::Status;
using sdk::StatusCode;

// Defaults that follow the pattern preset: Kimi's tokenization_kimi.py reserves 256 special
// ids after the base ranks and cuts text at 400,000 code points and at runs of 25,000
// whitespace / non-whitespace code points before calling tiktoken; cl100k and o200k (plain
// tiktoken) do neither.
constexpr std::uint32_t kKimiReserved = 256;
constexpr std::size_t kKimiMaxChunkChars = 400000;
constexpr std::size_t kKimiMaxRunChars = 25000;
// The largest rank file or tokenizer config read (Kimi's tiktoken.model is ~3 MB, o200k's ~4 MB).
constexpr std::uint64_t kMaxFileBytes = std::uint64_t{256} << 20;

// The whole file `uri`, read through the host (the pipeline's storage plugin, so a rank
// file next to the checkpoint is reached the way the checkpoint is: a path or a URL).
std::string read_through_host(sdk::HostServices* host, const std::string& uri, const char* what) {
  if (host == nullptr) fail(StatusCode::internal, uri + ": the host gave no services to read the " + what);
  std::string data;
  const Status st = host->read_file(uri, kMaxFileBytes, data);
  if (st.code == StatusCode::not_found) fail(StatusCode::not_found, uri + ": " + what + " not found (" + st.detail + ")");
  if (!st.ok()) fail(st.code, uri + ": cannot read the " + what + ": " + st.detail);
  return data;
}

Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::Tokenizer>& out,
              std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params);
  Status status;
  const std::string model = params.get_string("model", "");
  const std::string pattern = params.get_string("pattern", "kimi");
  const std::string config = params.get_string("config", "");
  const std::string specials = params.get_string("specials", "");
  const bool kimi = pattern == "kimi";
  const auto reserved = params.get_int<std::uint32_t>("num_reserved_special_tokens", kimi ? kKimiReserved : 0u, status);
  const auto max_chunk = params.get_int<std::size_t>("max_chunk_chars", kimi ? kKimiMaxChunkChars : 0u, status);
  const auto max_run = params.get_int<std::size_t>("max_run_chars", kimi ? kKimiMaxRunChars : 0u, status);
  unknown_params = params.unused();
  if (!status.ok()) return status;
  if (model.empty()) return Status::error(StatusCode::invalid_argument, "model: the path or URI of the rank file is required");

  try {
    TiktokenConfig cfg{RankTable::parse(read_through_host(args.host, model, "rank file"), model),
                       pattern_source(pattern), {}, {max_chunk, max_run}};
    if (!config.empty())
      cfg.specials.add_from_config(read_through_host(args.host, config, "tokenizer config"), config);
    if (!specials.empty()) cfg.specials.add_inline(specials);
    if (reserved > kMaxRank - cfg.ranks.end())
      return Status::error(StatusCode::invalid_argument, "num_reserved_special_tokens: too large");
    cfg.specials.add_reserved(cfg.ranks.end(), reserved);
    cfg.specials.finish();
    out = std::make_unique<TiktokenTokenizer>(std::move(cfg));
  } catch (const TokenizerError& e) {
    return Status::error(e.code(), e.what());
  }
  if (args.host != nullptr)
    args.host->log(sdk::LogLevel::debug, "tokenizer/tiktoken",
                   "loaded " + model + " (pattern " + pattern + ", vocabulary " + std::to_string(out->vocab_size()) + ")");
  return Status::success();
}

}  // namespace

}  // namespace k3::tiktoken

K3_PLUGIN(tokenizer, "tiktoken", "1.0", k3::tiktoken::create, nullptr)
