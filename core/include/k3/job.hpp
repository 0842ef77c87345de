// The main job of a pipeline: make sure the model exists (generating the synthetic demo
// checkpoint at the demo location of configs/default.yaml only; any other missing
// model.path is a UsageError naming it), load it through the pipeline's plugins, tokenise
// the prompt, generate, and write the trace, the state and the JSON report. A run stopped
// early (LoadHooks::stop) writes them too, with what it did. The CLI prints; this library
// code does not.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/generate.hpp>
#include <k3/model.hpp>
#include <k3/pipeline.hpp>
#include <k3/plan.hpp>
#include <k3/runtime.hpp>

namespace k3 {

struct JobHooks : LoadHooks {
  /// The prompt as text and ids, before generation starts.
  std::function<void(const std::string& text, const std::vector<std::uint32_t>& ids)> on_prompt;
  /// Each generated token with the text that became complete with it (TextStream).
  std::function<void(std::uint32_t id, const std::string& text)> on_token;
  /// The report was written to this file: at the end of a run, and also when the run fails
  /// part way (exit 1, or exit 5 cut short by a storage wait) before the exception leaves.
  std::function<void(const std::filesystem::path& report)> on_report;
  // LoadHooks::stop also stops generation: at the next token or prefill chunk, after which
  // the job still writes the trace, the state and the report of what was done
  // (JobReport::result.interrupted). During the run the storage plugin sees it too
  // (HostServices::stop_requested), so a storage wait is cut short: generation ends with
  // GenerateResult::cut, the report is written and the state is not saved.
};

/// Storage traffic and cache outcome of one generated token (its forward pass).
struct StepIo {
  std::uint64_t expert_bytes = 0, trunk_bytes = 0, table_bytes = 0;
  std::uint64_t expert_requests = 0, expert_hits = 0;
  double io_wait_seconds = 0;
  double expert_wait_seconds = 0;  ///< of io_wait_seconds, for routed experts
  /// True resident hit rate: requests served by an expert already in the cache (nothing is
  /// read speculatively, so every hit is a true one); 0 when there were no requests.
  [[nodiscard]] double hit_rate() const {
    return expert_requests ? static_cast<double>(expert_hits) / static_cast<double>(expert_requests) : 0.0;
  }
};

struct JobReport {
  std::string model;            ///< model.path: a folder or a URL, as the storage plugin reads it
  CheckpointIdentity identity;  ///< what the model's weights are (k3/checkpoint.hpp)
  /// The storage plugin's own counters (sdk::StorageCounters), when it has any: e.g. the
  /// tier's blocks served, and those dropped as damaged and fetched again.
  std::vector<std::pair<std::string, std::uint64_t>> storage_counters;
  std::string kernels, storage, mode;
  int threads = 0;
  std::int64_t context = 0;  ///< memory.context: positions the session holds
  std::string prompt_text;
  GenerateResult result;
  std::string generated_text;
  double load_seconds = 0;
  double tokens_per_second = 0;     ///< decode_forwards / decode seconds (prefill excluded)
  std::size_t decode_forwards = 0;  ///< generated tokens fed back (generated tokens - 1)
  SpeculativeSettings speculative;  ///< as configured (result.speculative: what it did)
  std::uint64_t peak_rss = 0;       ///< bytes, getrusage
  std::uint64_t weight_bytes_read = 0;
  std::filesystem::path trace_file;  ///< trace.out, when recorded (an interrupted run's too)
  std::filesystem::path state_file;  ///< job.save_state, when saved
  /// The ids the session holds unfed after the run (its last generated token, or the rest
  /// of an interrupted prefill): a run resumed from the saved state feeds them first.
  std::vector<std::uint32_t> pending;
  std::filesystem::path report_file;  ///< where the JSON went (empty if not written)
  // Streaming (docs/streaming.md "Report").
  MemoryPlan plan;
  std::string plan_text;  ///< the printed plan
  bool streaming = false;
  std::string cache_policy;
  std::size_t prefetch_depth = 0;  ///< cache.prefetch.depth of the run
  std::vector<StepIo> step_io;     ///< per generated token, same order as result.steps
  StreamStats io;                  ///< whole run, load included
  double wall_seconds = 0;         ///< load + prefill + decode
  double io_share = 0;             ///< compute thread waiting for storage ÷ wall clock
  double seconds_per_token = 0;    ///< decode seconds ÷ decode forward passes
  /// Non-empty: routed experts failed to load; the run finished but the ids are unsound (exit 4).
  std::vector<std::string> expert_failures;
  /// The exit code the CLI gives this run (0, 4, 5; 1 in the report of a failed run).
  int exit_code = 0;
  /// Why the run did not end well: the error of a failed run, the lost experts of exit 4, a
  /// stop that cut a forward pass short; empty when it did.
  std::string failure;
};

/// The prompt of the pipeline's job: job.ids (checked against the vocabulary), else the text
/// of job.prompt_file, else job.prompt, encoded with the runtime's tokenizer. With
/// job.load_state only a value the user gave counts (set_by_user): configs/default.yaml's
/// demo prompt is not appended to a resumed conversation. UsageError for a bad id, an
/// unreadable file or text the tokenizer refuses.
struct JobPrompt {
  std::string text;  ///< as given, or the ids decoded
  std::vector<std::uint32_t> ids;
};
JobPrompt job_prompt(const Pipeline& pipeline, const Runtime& runtime);
/// The same in two steps: what the pipeline says, read before the model loads (the prompt
/// file too, so a wrong path fails at once), then checked and encoded with the runtime.
struct JobPromptSource {
  std::vector<std::string> ids;  ///< job.ids as written
  std::string text;              ///< job.prompt_file's text or job.prompt, when there are no ids
  /// The file the text came from, as messages name it ("--file x: job.prompt_file: x");
  /// empty for job.prompt. Text the tokenizer refuses is reported there.
  std::string file;
};
JobPromptSource read_job_prompt(const Pipeline& pipeline);
JobPrompt job_prompt(const JobPromptSource& source, const Runtime& runtime);

/// Token ids written as text ("5", "17"), each checked to be an id of a vocabulary of
/// `vocab`. UsageError "<where>: '<text>' is not a token id of this model (0 … vocab-1)".
std::vector<std::uint32_t> parse_token_ids(const std::vector<std::string>& items, std::int64_t vocab,
                                           std::string_view where);

/// Refuses the pipeline's outputs (job.report, job.save_state, job.dump_logits,
/// trace.out, job.results) before anything runs: each must be absent or a regular file outside the
/// checkpoint folders (k3/user_files.hpp, check_output_file; checkpoint_folders), and no two
/// may name the same file. UsageError naming where the key was set, the key and the path.
void check_job_outputs(const Pipeline& pipeline);
/// Refuses, before the model loads, a job.load_state, cache.future or (when drafting is on)
/// job.speculative.datastore that is missing, is not a regular file or is over its cap
/// (k3/user_files.hpp, check_input_file), naming where the key was set.
void check_job_inputs(const Pipeline& pipeline);

/// Runs the job the pipeline describes. UsageError (exit 2) for anything wrong in the
/// pipeline, the checkpoint or the prompt, before any compute. Any other failure (exit 1;
/// exit 5 outside generation) first writes the report, with `failure` and what was done,
/// then leaves as the exception it was.
JobReport run_job(const Pipeline& pipeline, const JobHooks& hooks = {});
/// The same through `host` (its search path is the caller's; the pipeline's plugin_path
/// is not added). The run creates each of its plugin objects once through it.
JobReport run_job(const Pipeline& pipeline, PluginHost& host, const JobHooks& hooks = {});

/// The report as JSON (what --out / job.report writes).
std::string report_json(const JobReport& report);

}  // namespace k3
