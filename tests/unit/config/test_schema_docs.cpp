// docs/pipelines.md embeds the key reference generated from the schema; this keeps them
// equal. To regenerate after changing core/src/config/schema.cpp:
//   K3_UPDATE_DOCS=1 build/bin/k3test-config "[docs]"
#include "config_test_util.hpp"

#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace {

const std::string kBegin = "<!-- schema:begin (generated from core/src/config/schema.cpp; do not edit) -->\n";
const std::string kEnd = "<!-- schema:end -->";

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("docs/pipelines.md holds the generated key reference, and every key", "[docs]") {
  const fs::path doc = k3test::source_dir() / "docs/pipelines.md";
  REQUIRE(fs::exists(doc));
  std::string text = read_all(doc);
  const std::size_t begin = text.find(kBegin);
  const std::size_t end = text.find(kEnd);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  REQUIRE(begin < end);
  const std::size_t body = begin + kBegin.size();
  const std::string generated = k3::pipeline_schema_markdown();

  if (const char* update = std::getenv("K3_UPDATE_DOCS"); update != nullptr && std::string(update) == "1") {
    text.replace(body, end - body, generated);
    const fs::path tmp = doc.string() + ".tmp";
    std::ofstream(tmp, std::ios::binary) << text;
    fs::rename(tmp, doc);
    WARN("rewrote the key reference in " << doc);
    return;
  }
  CHECK(text.substr(body, end - body) == generated);
  for (const auto& key : k3::pipeline_keys()) {
    INFO(key);
    CHECK(text.find("`" + key + "`") != std::string::npos);
  }
}

TEST_CASE("every schema key has a value after loading, readable through its getter", "[defaults]") {
  k3test::TempDir dir;
  const k3::Pipeline p = k3::load_pipeline(dir.write("p.yaml", ""));
  for (const auto& key : k3::pipeline_keys()) {
    INFO(key);
    if (key == "extends") {
      CHECK_FALSE(p.has(key));
      continue;
    }
    CHECK(p.has(key));
    CHECK(p.where(key) == "default");
  }
  CHECK(p.get_int("threads") == 0);
  CHECK(p.get_double("memory.trunk_gb") == 3.0);
  CHECK(p.get_budget("memory.expert_cache_gb") == std::optional<double>(1.0));
  CHECK_FALSE(p.get_bool("memory.stream_embedding"));
  CHECK(p.get_int("memory.context") == 4096);
  CHECK(p.get_strings("plugin_path").empty());
  CHECK(p.get_ints("job.ids").empty());
  CHECK(p.get_params("storage.params").empty());
  CHECK(p.get_double("job.sampling.top_p") == 1.0);
  CHECK(p.get_int("job.prefill_chunk") == 64);
}

TEST_CASE("asking for a key outside the schema or with the wrong getter is a programming error", "[defaults]") {
  k3test::TempDir dir;
  const k3::Pipeline p = k3::load_pipeline(dir.write("p.yaml", "memory: {trunk_gb: fit}\n"));
  CHECK_THROWS_AS(p.get_string("no.such.key"), std::logic_error);
  CHECK_THROWS_AS(p.get_int("job.prompt"), std::logic_error);
  CHECK_THROWS_AS(p.get_double("memory.trunk_gb"), std::logic_error);  // fit: use get_budget
  CHECK_THROWS_AS(p.get_path("threads"), std::logic_error);
  CHECK_THROWS_AS(p.get_string("plugin_path"), std::logic_error);
  CHECK_THROWS_AS(p.where("storage.params.unset"), std::logic_error);
  CHECK_FALSE(p.has("no.such.key"));
  CHECK_FALSE(p.has("storage.params.unset"));
}
