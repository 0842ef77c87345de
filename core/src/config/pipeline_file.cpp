// resolve_pipeline_file(): what --config NAME|FILE names; the data folder's presets and
// default pipeline (k3/data_dir.hpp). A name that is no preset suggests the closest one.
#include <algorithm>

#include <k3/closest_name.hpp>
#include <k3/data_dir.hpp>
#include <k3/error.hpp>
#include <k3/pipeline.hpp>

namespace k3 {

namespace fs = std::filesystem;

fs::path default_presets_dir() { return data_path("presets"); }

fs::path default_pipeline_file() { return data_path("configs/default.yaml"); }

fs::path resolve_pipeline_file(const std::string& name_or_path) {
  std::error_code ec;
  const bool is_path = name_or_path.empty() || name_or_path.find('/') != std::string::npos ||
                       name_or_path.ends_with(".yaml") || name_or_path.ends_with(".yml") ||
                       fs::exists(name_or_path, ec);
  if (is_path) return name_or_path;  // the loader reports a missing or unreadable file
  const fs::path dir = default_presets_dir();
  const fs::path preset = dir / (name_or_path + ".yaml");
  if (fs::is_regular_file(preset, ec)) return preset;

  std::vector<std::string> names;
  if (fs::is_directory(dir, ec))
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  const std::string near = closest_name(name_or_path, names);
  throw UsageError("pipeline '" + name_or_path + "' not found" +
                   (near.empty() ? "" : " (did you mean '" + near + "'?)") + ": no file ./" + name_or_path +
                   " and no preset " + preset.string() +
                   (known.empty() ? " (the presets folder " + dir.string() + " is missing or empty: a broken install?)"
                                  : " (presets: " + known + ")"));
}

}  // namespace k3
