// YAML pipelines and --set values, through load_pipeline on a file (as `k3host run --config
// FILE --set a=b ...` does). The input is split at NUL bytes (which YAML text never holds):
// the first part is the pipeline file, every further part (up to 8) one --set assignment.
// The file sits in <scratch>/presets/ beside a copy of the shipped configs/default.yaml in
// <scratch>/configs/, so the presets' `extends: ../configs/default.yaml` resolves.
// The loader caps the file's size, its nesting depth and node count, and its documents.
// Oracle (Pipeline::dump's promise): an accepted pipeline's dump loads again, to the same
// values (compared as YAML trees, without the comments that say where each value was set).
#include <yaml-cpp/yaml.h>

#include <k3/pipeline.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = k3::fuzz::split(k3::fuzz::as_text(data, size), std::string_view("\0", 1), 9);
  static const bool layout = [] {
    std::filesystem::create_directories(k3::fuzz::scratch().path() / "presets");
    std::filesystem::create_directories(k3::fuzz::scratch().path() / "configs");
    std::filesystem::copy_file(k3::default_pipeline_file(), k3::fuzz::scratch().path() / "configs/default.yaml",
                               std::filesystem::copy_options::overwrite_existing);
    return true;
  }();
  (void)layout;
  const auto file = k3::fuzz::scratch().write("presets/pipeline.yaml", parts[0]);
  std::vector<std::string> sets(parts.begin() + 1, parts.end());
  k3::fuzz::guarded([&] {
    const k3::Pipeline p = k3::load_pipeline(file, sets);
    const std::string dumped = p.dump();
    const auto again_file = k3::fuzz::scratch().write("dumped.yaml", dumped);
    std::string again;
    try {
      again = k3::load_pipeline(again_file).dump();
    } catch (const k3::Error& e) {
      k3::fuzz::finding(std::string("an accepted pipeline's dump does not load again: ") + e.what() + "\n" + dumped);
    }
    const auto values = [](const std::string& yaml) { return YAML::Dump(YAML::Load(yaml)); };
    k3::fuzz::check(values(again) == values(dumped),
                    "an accepted pipeline's dump loads to another dump:\n" + dumped + "\n---\n" + again);
  });
  return 0;
}
