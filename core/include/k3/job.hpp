// The main job of a pipeline: make sure the model exists (generating the default synthetic
// checkpoint when allowed), load it through the pipeline's plugins, tokenise the prompt,
// generate, and write the JSON report. The CLI prints; this library code does not.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <k3/generate.hpp>
#include <k3/pipeline.hpp>

namespace k3 {

struct JobHooks {
  /// A line of progress (model generation, loading); may be empty.
  std::function<void(const std::string&)> on_status;
  /// Progress of long work (bytes done of total); may be empty.
  std::function<void(const std::string& what, std::uint64_t done, std::uint64_t total)> on_progress;
  /// The prompt as text and ids, before generation starts.
  std::function<void(const std::string& text, const std::vector<std::uint32_t>& ids)> on_prompt;
  /// Each generated token with its decoded text (may be a partial UTF-8 sequence).
  std::function<void(std::uint32_t id, const std::string& text)> on_token;
};

struct JobReport {
  std::filesystem::path model;
  std::string kernels, storage, mode;
  int threads = 0;
  std::string prompt_text;
  GenerateResult result;
  std::string generated_text;
  double load_seconds = 0;
  double tokens_per_second = 0;   ///< generated tokens / decode seconds (prefill excluded)
  std::uint64_t peak_rss = 0;     ///< bytes, getrusage
  std::uint64_t weight_bytes_read = 0;
  std::filesystem::path report_file;  ///< where the JSON went (empty if not written)
};

/// Runs the job the pipeline describes. UsageError (exit 2) for anything wrong in the
/// pipeline, the checkpoint or the prompt, before any compute.
JobReport run_job(const Pipeline& pipeline, const JobHooks& hooks = {});

/// The report as JSON (what --out / job.report writes).
std::string report_json(const JobReport& report);

}  // namespace k3
