// A stop request while the demo checkpoint is written on the first run ends that work at
// its next batch with exit code 5 (ExitCode::interrupted), and nothing of the checkpoint
// is kept: neither the folder nor make-model's temporary folder beside it.
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>

#include <k3/error.hpp>
#include <k3/job.hpp>
#include <k3/pipeline.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

}  // namespace

TEST_CASE("a stop request while the demo checkpoint is written keeps nothing of it and exits 5", "[job][stop]") {
  // A configs/default.yaml of its own: its model.path is the demo (model.demo_path), generated
  // on first use (here with the tiny geometry).
  const auto root = k3::test::scratch_dir() / "first-run";
  std::filesystem::create_directories(root / "configs");
  std::ofstream(root / "configs/default.yaml")
      << "model:\n  path: demo\n  demo_path: ../models/demo\n  geometry: tiny\n  generate_if_missing: true\n"
         "job:\n  ids: [1, 2, 3]\n  max_new_tokens: 2\n";
  const k3::Pipeline p = k3::load_pipeline(root / "configs/default.yaml", {"threads=1"});
  REQUIRE(p.get_path("model.path") == root / "models/demo");

  std::atomic<bool> stop{true};  // requested before the first batch is written
  k3::JobHooks hooks;
  hooks.stop = &stop;
  try {
    (void)k3::run_job(p, hooks);
    FAIL("the run was not stopped");
  } catch (const k3::Error& e) {
    CHECK(e.code() == k3::ExitCode::interrupted);
    CHECK_THAT(e.what(), Catch::Contains("interrupted while writing the synthetic 'tiny' checkpoint") &&
                             Catch::Contains((root / "models/demo").string()));
  }
  CHECK_FALSE(std::filesystem::exists(root / "models/demo"));
  for (const auto& e : std::filesystem::directory_iterator(root / "models")) FAIL_CHECK("left behind: " << e.path());

  // Without a stop request the same pipeline writes the model and runs.
  stop.store(false);
  const k3::JobReport r = k3::run_job(p, hooks);
  CHECK(r.result.generated.size() == 2);
  CHECK_FALSE(r.result.interrupted);
  CHECK(std::filesystem::exists(root / "models/demo/config.json"));
}
