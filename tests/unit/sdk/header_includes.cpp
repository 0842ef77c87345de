// The SDK interfaces depend on the C++ standard library only (docs/architecture.md): every
// #include in sdk/k3/*.hpp names a standard header or another SDK header; the one
// exception is plugin.hpp, which wraps Boost.DLL's BOOST_DLL_ALIAS.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace fs = std::filesystem;

namespace {

// The C++20 standard library headers (and the C headers in their <cxxx> form).
// clang-format off
const std::set<std::string> kStandardHeaders = {
    "algorithm", "any", "array", "atomic", "barrier", "bit", "bitset", "cassert", "cctype", "cerrno", "cfenv",
    "cfloat", "charconv", "chrono", "cinttypes", "climits", "clocale", "cmath", "codecvt", "compare", "complex",
    "concepts", "condition_variable", "coroutine", "csetjmp", "csignal", "cstdarg", "cstddef", "cstdint", "cstdio",
    "cstdlib", "cstring", "ctime", "cuchar", "cwchar", "cwctype", "deque", "exception", "execution", "filesystem",
    "format", "forward_list", "fstream", "functional", "future", "initializer_list", "iomanip", "ios", "iosfwd",
    "iostream", "istream", "iterator", "latch", "limits", "list", "locale", "map", "memory", "memory_resource",
    "mutex", "new", "numbers", "numeric", "optional", "ostream", "queue", "random", "ranges", "ratio", "regex",
    "scoped_allocator", "semaphore", "set", "shared_mutex", "source_location", "span", "sstream", "stack",
    "stdexcept", "stop_token", "streambuf", "string", "string_view", "syncstream", "system_error", "thread",
    "tuple", "type_traits", "typeindex", "typeinfo", "unordered_map", "unordered_set", "utility", "valarray",
    "variant", "vector", "version"};
// clang-format on

struct Include {
  std::string target;  // what is between the delimiters
  bool angled = true;
};

std::vector<Include> includes_of(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE(in);
  const std::regex directive(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> out;
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, directive)) out.push_back({m[2].str(), m[1].str() == "<"});
  return out;
}

std::vector<fs::path> sdk_headers() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(K3_SOURCE_DIR) / "sdk" / "k3"))
    if (e.path().extension() == ".hpp") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("SDK headers include only the standard library and each other", "[sdk]") {
  const auto headers = sdk_headers();
  REQUIRE(headers.size() >= 8);  // abi cache_policy host kernels plugin status storage tokenizer
  std::set<std::string> sdk_names;
  for (const auto& h : headers) sdk_names.insert(h.filename().string());

  for (const auto& header : headers) {
    const std::string name = header.filename().string();
    INFO("sdk/k3/" << name);
    for (const auto& inc : includes_of(header)) {
      INFO("#include " << (inc.angled ? "<" : "\"") << inc.target << (inc.angled ? ">" : "\""));
      CHECK(inc.angled);  // quoted includes would search next to the installed header
      const bool standard = kStandardHeaders.count(inc.target) != 0;
      const bool sdk = inc.target.rfind("k3/", 0) == 0 && sdk_names.count(inc.target.substr(3)) != 0;
      const bool boost_alias = name == "plugin.hpp" && inc.target == "boost/dll/alias.hpp";
      CHECK((standard || sdk || boost_alias));
    }
  }
}

TEST_CASE("the include check itself recognises a foreign header", "[sdk]") {
  // Guards against a regex that silently matches nothing.
  const fs::path dir = fs::path(K3_BINARY_DIR) / "test-tmp" / "sdk-include-check";
  fs::create_directories(dir);
  const fs::path probe = dir / "probe.hpp";
  {
    std::ofstream out(probe);
    out << "#pragma once\n#include <vector>\n  #  include \"local.h\"\n#include <yaml-cpp/yaml.h>\n";
  }
  const auto found = includes_of(probe);
  REQUIRE(found.size() == 3);
  CHECK(found[0].target == "vector");
  CHECK_FALSE(found[1].angled);
  CHECK(found[2].target == "yaml-cpp/yaml.h");
  CHECK(kStandardHeaders.count(found[2].target) == 0);
}
