// The /proc, /sys and cgroup file readers of the probes (sys_files.hpp).
#include "machine/sys_files.hpp"

#include <charconv>
#include <fstream>
#include <sstream>

namespace k3::machine::sys {

namespace fs = std::filesystem;

std::optional<std::string> first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<std::string> whole(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<std::uint64_t> number(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word)) return std::nullopt;
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
  if (ec != std::errc() || end != word.data() + word.size()) return std::nullopt;  // "max", "-1"
  return v;
}

namespace {

/// Our path in the hierarchy whose proc/self/cgroup line matches: "0::" (v2) or a v1 line
/// "N:<controllers>:" listing `controller`.
std::optional<std::string> own_path(const fs::path& root, const std::string& controller) {
  std::ifstream in(root / "proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto c1 = line.find(':');
    const auto c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string path = line.substr(c2 + 1);
    if (controller.empty()) {
      if (line.rfind("0::", 0) == 0) return path;
      continue;
    }
    std::stringstream list(controllers);
    std::string item;
    while (std::getline(list, item, ','))
      if (item == controller) return path;
  }
  return std::nullopt;
}

}  // namespace

std::vector<fs::path> cgroup_v2_path_up(const fs::path& root) {
  const fs::path base = root / "sys/fs/cgroup";
  std::vector<fs::path> out;
  const std::string own = own_path(root, "").value_or("/");
  fs::path rel = fs::path(own).relative_path();
  // Walk from our cgroup up to the root of the hierarchy.
  while (true) {
    out.push_back(rel.empty() ? base : base / rel);
    if (rel.empty()) break;
    rel = rel.parent_path();
  }
  return out;
}

std::optional<fs::path> cgroup_v1_dir(const fs::path& root, const std::string& controller) {
  const fs::path base = root / "sys/fs/cgroup";
  std::error_code ec;
  for (const std::string& mount : {controller, controller + ",cpuacct", std::string("cpuacct,") + controller}) {
    const fs::path dir = base / mount;
    if (!fs::is_directory(dir, ec)) continue;
    if (const auto own = own_path(root, controller)) {
      const fs::path mine = dir / fs::path(*own).relative_path();
      if (fs::is_directory(mine, ec)) return mine;
    }
    return dir;
  }
  return std::nullopt;
}

}  // namespace k3::machine::sys
