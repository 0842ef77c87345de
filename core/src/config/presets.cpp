// list_presets(): the memory presets, read from their files (never from a table in code).
#include <algorithm>
#include <limits>
#include <optional>

#include <k3/error.hpp>
#include <k3/pipeline.hpp>

namespace k3 {

namespace fs = std::filesystem;

std::vector<PresetInfo> list_presets(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("presets folder '" + dir.string() + "' does not exist");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());

  struct Sorted {
    PresetInfo info;
    std::optional<double> trunk;
    std::optional<double> cache;
  };
  std::vector<Sorted> presets;
  for (const auto& file : files) {
    const Pipeline p = load_pipeline(file);
    Sorted s;
    s.info.name = file.stem().string();
    s.info.description = p.get_string("description");
    s.info.file = file;
    s.info.trunk_gb = p.get_string("memory.trunk_gb");
    s.info.expert_cache_gb = p.get_string("memory.expert_cache_gb");
    s.trunk = p.get_budget("memory.trunk_gb");
    s.cache = p.get_budget("memory.expert_cache_gb");
    presets.push_back(std::move(s));
  }
  // Smallest first; "fit" (sized at run time) after every fixed budget.
  const auto key = [](const std::optional<double>& v) { return v ? *v : std::numeric_limits<double>::infinity(); };
  std::stable_sort(presets.begin(), presets.end(), [&](const Sorted& a, const Sorted& b) {
    if (key(a.trunk) != key(b.trunk)) return key(a.trunk) < key(b.trunk);
    return key(a.cache) < key(b.cache);
  });
  std::vector<PresetInfo> out;
  for (auto& s : presets) out.push_back(std::move(s.info));
  return out;
}

}  // namespace k3
