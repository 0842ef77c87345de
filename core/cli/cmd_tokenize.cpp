// k3host tokenize: text -> ids (or ids -> text with --decode) through the tokenizer section
// of a pipeline, for scripts and parity checks.
//
//   k3host tokenize [--config PIPELINE] [--set tokenizer.params.model=F] [--file F | -p TEXT | --ids IDS]
//                   [--decode] [--special] [--lines]
//
// Input is the file (--file, or the main job's --prompt-file), the text of -p/--prompt, or
// stdin, byte for byte; --ids IDS decodes those ids. Encoding prints the ids space-separated
// on one line; --decode reads ids separated by whitespace or commas (as --ids takes them)
// and writes the bytes they stand for, with nothing added. --lines treats every input line (split at '\n', which is not
// part of the line) on its own: one output line per input line, in both directions. Without --config the default
// pipeline (configs/default.yaml of the data folder, the source tree's or the installed one: k3/data_dir.hpp) is used.
// When the tokenizer params name no rank file, the checkpoint's own files are used: <model.path>/tiktoken.model and, if
// it exists, <model.path>/tokenizer_config.json, read through the pipeline's storage plugin (model.path may be a URL).
// Bad input (invalid UTF-8, an id outside the vocabulary, a word that is not an id) is a
// usage error (exit 2) naming the line and byte offset.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <k3/checkpoint.hpp>
#include <k3/error.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>
#include <k3/runtime.hpp>
#include <k3/units.hpp>
#include <k3/user_files.hpp>

#include "cli.hpp"

namespace k3::cli {

namespace {

struct TokenizeOptions {
  std::string file;
  bool decode = false;
  bool special = false;
  bool lines = false;
};


/// The input: the file (a regular file of at most kMaxTextFileBytes, checked before it is
/// read) or stdin, read up to the same cap.
std::string read_input_text(const std::string& file) {
  if (!file.empty()) return read_user_file(file, "tokenize --file", "text file", kMaxTextFileBytes);
  std::string data;
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    data.append(buf, n);
    if (data.size() > kMaxTextFileBytes)
      throw UsageError("tokenize: stdin: more than " + format_bytes(kMaxTextFileBytes) +
                       ", the most k3host tokenizes at once; split the input");
  }
  if (std::ferror(stdin) != 0) throw RuntimeError("stdin: read error");
  return data;
}

void write_output(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size()) throw RuntimeError("stdout: write error");
}

/// Whole input, or its lines without the '\n' (a final line without '\n' counts too).
std::vector<std::string_view> units_of(std::string_view input, bool lines) {
  if (!lines) return {input};
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos < input.size()) {
    std::size_t eol = input.find('\n', pos);
    if (eol == std::string_view::npos) eol = input.size();
    out.push_back(input.substr(pos, eol - pos));
    pos = eol + 1;
  }
  return out;
}

[[noreturn]] void throw_status(const sdk::Status& st, const std::string& where) {
  const std::string msg = "tokenizer: " + where + st.detail;
  if (st.code == sdk::StatusCode::invalid_argument || st.code == sdk::StatusCode::not_found) throw UsageError(msg);
  throw RuntimeError(msg);
}

std::shared_ptr<sdk::Tokenizer> make_tokenizer(const GlobalOptions& global) {
  const Pipeline pipeline =
      load_pipeline(global.config.empty() ? default_pipeline_file() : std::filesystem::path(global.config),
                    global.overrides);
  PluginHost host(pipeline.plugin_path());
  const auto storage = create_pipeline_storage(pipeline, host);
  // The tokenizer reads its files at creation only, so the storage may end with this function.
  return create_pipeline_tokenizer(pipeline, host, pipeline.get_path("model.path").string(), storage);
}

/// What to read: --file (or the main job's --prompt-file), -p TEXT, --ids IDS (which decodes),
/// else stdin; two of them are a usage error rather than one silently ignored.
struct TokenizeInput {
  std::string file;
  std::optional<std::string> text;
  bool decode = false;
};
TokenizeInput tokenize_input(const GlobalOptions& global, const TokenizeOptions& opt) {
  TokenizeInput in{opt.file, std::nullopt, opt.decode};
  std::vector<std::string> given;
  if (!opt.file.empty()) given.emplace_back("--file");
  if (const PipelineFlag* f = given_flag(global, "job.prompt_file")) {
    in.file = f->value;
    given.emplace_back("--prompt-file");
  }
  if (const PipelineFlag* p = given_flag(global, "job.prompt")) {
    in.text = p->value;
    given.emplace_back("--prompt");
  }
  if (const PipelineFlag* ids = given_flag(global, "job.ids")) {
    in.text = ids->value;
    in.decode = true;
    given.emplace_back("--ids");
  }
  if (given.size() > 1)
    throw UsageError("tokenize: " + given[0] + " and " + given[1] + " both give the input; give one (or none: stdin)");
  return in;
}

int run_tokenize(const GlobalOptions& global, const TokenizeOptions& options) {
  const TokenizeInput in = tokenize_input(global, options);
  TokenizeOptions opt = options;
  opt.decode = in.decode;
  const std::shared_ptr<sdk::Tokenizer> tokenizer = make_tokenizer(global);
  const std::string input = in.text ? *in.text : read_input_text(in.file);
  const auto units = units_of(input, opt.lines);
  std::string out;
  std::vector<std::uint32_t> ids;
  const std::string source = opt.file.empty() ? std::string() : opt.file + ": ";
  for (std::size_t u = 0; u < units.size(); ++u) {
    const std::string where = source + (opt.lines ? "line " + std::to_string(u + 1) + ": " : std::string());
    ids.clear();
    if (opt.decode) {
      const std::string_view text = units[u];
      // Ids are separated by whitespace, commas or both ("1 2 3", "1,2,3", "1, 2").
      const auto separator = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ','; };
      std::size_t pos = 0;
      while (pos < text.size()) {
        while (pos < text.size() && separator(text[pos])) ++pos;
        if (pos == text.size()) break;
        std::size_t end = pos;
        while (end < text.size() && !separator(text[end])) ++end;
        std::uint32_t id = 0;
        const auto res = std::from_chars(text.data() + pos, text.data() + end, id);
        if (res.ec != std::errc{} || res.ptr != text.data() + end)
          throw UsageError("tokenize --decode: " + where + "'" + std::string(text.substr(pos, end - pos)) +
                           "' is not a token id (byte offset " + std::to_string(pos) + ")");
        ids.push_back(id);
        pos = end;
      }
      if (const sdk::Status st = tokenizer->decode(ids, out); !st.ok()) throw_status(st, where);
      if (opt.lines) out += '\n';
    } else {
      if (const sdk::Status st = tokenizer->encode(units[u], opt.special, ids); !st.ok()) throw_status(st, where);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (i > 0) out += ' ';
        out += std::to_string(ids[i]);
      }
      out += '\n';
    }
  }
  write_output(out);
  return 0;
}

}  // namespace

Command register_tokenize(CLI::App& app, GlobalOptions& global) {
  auto* sub = app.add_subcommand("tokenize", "Encode text to token ids (or decode ids) with the pipeline's tokenizer");
  auto opt = std::make_shared<TokenizeOptions>();
  sub->add_option("--file,-f", opt->file,
                  "Input file (default: stdin; or the text of -p TEXT, or --ids IDS to decode)");
  sub->add_flag("--decode,-d", opt->decode,
                "Read token ids, separated by spaces or commas, and write the text they stand for");
  sub->add_flag("--special", opt->special,
                "Encode special-token text (<|end_of_msg|>, <|open|>: docs/chat.md) as its id, not as plain text");
  sub->add_flag("--lines", opt->lines, "Treat each input line on its own (one output line per input line)");
  sub->footer(
      "It keeps no state: Ctrl-C ends it at once. Exit codes: 0 ok, 1 a read or write failed, 2 a usage or "
      "configuration error or bad input (invalid UTF-8, a word that is not an id, an id outside the "
      "vocabulary: named with its line and byte offset).");
  return {sub, [&global, opt]() { return run_tokenize(global, *opt); }};
}

}  // namespace k3::cli
