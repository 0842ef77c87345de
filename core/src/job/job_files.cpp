// The files a run's pipeline names, checked before the model loads (docs/architecture.md,
// "Files a user names"): where it writes (job.report, job.save_state, job.dump_logits,
// trace.out, job.results), so that a path that would replace a device, a link or a file of the
// checkpoint in use is refused in a moment, not after the run; and what it reads besides
// the prompt (job.load_state, cache.future, job.speculative.datastore), so that a FIFO or a device is refused naming
// its key before minutes of loading.
#include <k3/job.hpp>

#include <cstdint>
#include <string_view>

#include <k3/error.hpp>
#include <k3/runtime.hpp>
#include <k3/trace.hpp>
#include <k3/user_files.hpp>

#include "io/uri.hpp"

namespace k3 {

namespace fs = std::filesystem;

std::vector<fs::path> checkpoint_folders(const Pipeline& p) {
  std::vector<fs::path> out;
  for (const char* key : {"model.path", "model.packed_trunk", "job.speculative.draft_model"}) {
    const fs::path dir = p.get_path(key);
    if (!dir.empty() && !io::has_uri_scheme(dir.string())) out.push_back(dir);
  }
  return out;
}

void check_job_outputs(const Pipeline& p) {
  const std::vector<fs::path> keep_out = checkpoint_folders(p);
  struct Output {
    const char* key;
    fs::path file;
  };
  std::vector<Output> outputs;
  for (const char* key : {"job.report", "job.save_state", "job.dump_logits", "trace.out", "job.results"}) {
    const fs::path file = p.get_path(key);
    if (file.empty()) continue;
    check_output_file(file, p.where(key) + ": " + key, keep_out);
    // Two outputs in one file: the second would replace the first.
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(fs::absolute(file, ec), ec);
    for (const Output& o : outputs) {
      std::error_code ec2;
      if (!ec && fs::weakly_canonical(fs::absolute(o.file, ec2), ec2) == canonical && !ec2)
        p.refuse(key, file.string() + ": is also " + o.key + " (from " + p.where(o.key) +
                          "); each output needs a file of its own");
    }
    outputs.push_back({key, file});
  }
}

void check_job_inputs(const Pipeline& p) {
  // Their caps are checked again when they are read: a state file's depends on the model.
  struct Input {
    const char* key;
    const char* noun;
    std::uint64_t max_bytes;
  };
  for (const Input& in :
       {Input{"job.load_state", "state file", UINT64_MAX}, Input{"cache.future", "trace", kTraceMaxFileBytes},
        Input{"job.speculative.datastore", "text file", kMaxTextFileBytes}}) {
    if (std::string_view(in.key) == "job.speculative.datastore" && p.get_int("job.speculative.max_draft") <= 0)
      continue;  // not read when nothing is drafted
    const fs::path file = p.get_path(in.key);
    if (!file.empty()) (void)check_input_file(file, p.where(in.key) + ": " + in.key, in.noun, in.max_bytes);
  }
}

}  // namespace k3
