// Registration of the tiktoken tokenizer and the table of its parameters (README.md explains them).
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
  if (st.code == StatusCode::not_found)
    fail(StatusCode::not_found, uri + ": " + what + " not found (" + st.detail + ")");
  if (!st.ok()) fail(st.code, uri + ": cannot read the " + what + ": " + st.detail);
  return data;
}

}  // namespace

constexpr k3::sdk::ParamDescriptor kParams[] = {
    sdk::param::required(sdk::param::path(
        "model", nullptr,
        "the rank file, one '<base64 token> <rank>' per line; k3host fills in <model.path>/tiktoken.model")),
    sdk::param::choice("pattern", "kimi", "kimi|cl100k|o200k|regex:*",
                       "the pre-tokenizer: a preset's official pat_str, or regex:<PCRE2 pattern>"),
    sdk::param::path("config", "",
                     "a Hugging Face tokenizer_config.json whose added_tokens_decoder become special tokens; k3host "
                     "fills in <model.path>/tokenizer_config.json when it exists; empty = none"),
    sdk::param::string("specials", "", "inline special tokens text=id,text=id; empty = none"),
    sdk::param::integer("num_reserved_special_tokens", nullptr, "[0, 4294967295]",
                        "ids after the largest rank that are special (reserved_token_<id>); unset = 256 with pattern "
                        "kimi, else 0"),
    sdk::param::integer("max_chunk_chars", nullptr, "[0, )",
                        "cut the text into pieces of this many code points first (Kimi's behaviour); 0 = off; unset "
                        "= 400000 with pattern kimi, else 0"),
    sdk::param::integer("max_run_chars", nullptr, "[0, )",
                        "also cut runs of whitespace or non-whitespace longer than this (Kimi's); 0 = off; unset = "
                        "25000 with pattern kimi, else 0"),
};

namespace {

Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::Tokenizer>& out,
              std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  const std::string model = params.get_string("model");
  const std::string pattern = params.get_string("pattern");
  const std::string config = params.get_string("config");
  const std::string specials = params.get_string("specials");
  const bool kimi = pattern == "kimi";
  const auto reserved = params.get_int<std::uint32_t>("num_reserved_special_tokens", kimi ? kKimiReserved : 0u);
  const auto max_chunk = params.get_int<std::size_t>("max_chunk_chars", kimi ? kKimiMaxChunkChars : std::size_t{0});
  const auto max_run = params.get_int<std::size_t>("max_run_chars", kimi ? kKimiMaxRunChars : std::size_t{0});
  unknown_params = params.unused();

  try {
    TiktokenConfig cfg{RankTable::parse(read_through_host(args.host, model, "rank file"), model),
                       pattern_source(pattern),
                       {},
                       {max_chunk, max_run}};
    if (!config.empty()) cfg.specials.add_from_config(read_through_host(args.host, config, "tokenizer config"), config);
    if (!specials.empty()) cfg.specials.add_inline(specials);
    if (reserved > kMaxRank - cfg.ranks.end())
      return params.refuse("num_reserved_special_tokens", "too large: the ids would pass 2^24 - 1 after the " +
                                                              std::to_string(cfg.ranks.end()) + " ranks");
    cfg.specials.add_reserved(cfg.ranks.end(), reserved);
    cfg.specials.finish();
    out = std::make_unique<TiktokenTokenizer>(std::move(cfg));
  } catch (const TokenizerError& e) {
    return Status::error(e.code(), e.what());
  }
  if (args.host != nullptr)
    args.host->log(sdk::LogLevel::debug, "tokenizer/tiktoken",
                   "loaded " + model + " (pattern " + pattern + ", vocabulary " + std::to_string(out->vocab_size()) +
                       ")");
  return Status::success();
}

}  // namespace

}  // namespace k3::tiktoken

K3_PLUGIN(tokenizer, "tiktoken", "1.0.0", k3::tiktoken::create, nullptr)
K3_PLUGIN_PARAMS(k3::tiktoken::kParams)
