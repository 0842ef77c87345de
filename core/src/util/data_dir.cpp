// data_dir(): relative to libk3core, like the plugin folder (k3/data_dir.hpp).
#include <k3/data_dir.hpp>

#include <boost/dll/runtime_symbol_info.hpp>

namespace k3 {

namespace fs = std::filesystem;

fs::path data_dir() {
  // this_line_location() is the file of libk3core itself, whatever path k3host reached it by.
  return fs::path(boost::dll::this_line_location()).parent_path() / "k3host" / "data";
}

fs::path data_path(const fs::path& relative) {
  const fs::path p = data_dir() / relative;
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : resolved;
}

}  // namespace k3
