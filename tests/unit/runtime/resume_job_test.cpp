// A resumed job (job.load_state) takes only a prompt the user gave: configs/default.yaml's
// demo prompt is not appended, so --load-state alone continues the saved conversation,
// while a prompt from --set or from the user's own file is fed after the pending ids.
#include <catch2/catch.hpp>

#include <fstream>

#include <k3/job.hpp>
#include <k3/pipeline.hpp>
#include <k3/runtime.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

std::vector<std::string> base_sets() {
  return {"model.path=" + k3::test::test_model("tiny").string(),
          "model.generate_if_missing=false",
          "job.max_new_tokens=3",
          "job.stop_at_eos=false",
          "job.report=''",
          "threads=1",
          "kernels.set=scalar"};
}

k3::Pipeline pipeline(const std::filesystem::path& file, std::vector<std::string> extra) {
  std::vector<std::string> sets = base_sets();
  sets.insert(sets.end(), extra.begin(), extra.end());
  return k3::load_pipeline(file, sets);
}

const std::filesystem::path kDefault = std::filesystem::path(K3_SOURCE_DIR) / "configs/default.yaml";

}  // namespace

TEST_CASE("set_by_user: --set and the user's files count, configs/default.yaml and defaults do not", "[job][state]") {
  const k3::Pipeline plain = pipeline(kDefault, {});
  REQUIRE(!plain.get_string("job.prompt").empty());  // configs/default.yaml's demo prompt
  CHECK_FALSE(k3::set_by_user(plain, "job.prompt"));
  CHECK_FALSE(k3::set_by_user(plain, "job.ids"));
  CHECK(k3::set_by_user(plain, "job.max_new_tokens"));  // a --set
  CHECK(k3::set_by_user(pipeline(kDefault, {"job.prompt=hello"}), "job.prompt"));
  const auto mine = k3::test::scratch_dir() / "mine.yaml";
  std::ofstream(mine) << "extends: " << kDefault.string() << "\njob:\n  prompt: my own words\n";
  CHECK(k3::set_by_user(pipeline(mine, {}), "job.prompt"));
  // A preset extends configs/default.yaml without setting a prompt: still the demo's.
  CHECK_FALSE(
      k3::set_by_user(pipeline(std::filesystem::path(K3_SOURCE_DIR) / "presets/laptop.yaml", {}), "job.prompt"));
}

TEST_CASE("a resumed job feeds the pending ids, then only a prompt the user gave", "[job][state]") {
  const auto state = k3::test::scratch_dir() / "job.k3state";
  const k3::JobReport first = k3::run_job(pipeline(kDefault, {"job.save_state=" + state.string()}));
  REQUIRE(first.result.generated.size() == 3);
  CHECK(first.result.prompt.size() > 0);  // the demo prompt: no state was loaded
  CHECK(first.pending == std::vector<std::uint32_t>{first.result.generated.back()});
  CHECK(first.state_file == state);

  SECTION("no prompt given: the conversation continues") {
    const k3::JobReport r = k3::run_job(pipeline(kDefault, {"job.load_state=" + state.string()}));
    CHECK(r.result.prompt.empty());
    CHECK(r.prompt_text.empty());
    CHECK(r.result.pending == first.pending);
    CHECK(r.result.generated.size() == 3);
  }
  SECTION("a prompt from --set is fed after the pending ids") {
    const k3::JobReport r =
        k3::run_job(pipeline(kDefault, {"job.load_state=" + state.string(), "job.prompt=\" and\""}));
    CHECK(r.prompt_text == " and");
    CHECK(!r.result.prompt.empty());
    CHECK(r.result.pending == first.pending);
  }
  SECTION("a prompt from the user's own pipeline file is fed too") {
    const auto mine = k3::test::scratch_dir() / "resume.yaml";
    std::ofstream(mine) << "extends: " << kDefault.string() << "\njob:\n  ids: [7, 8]\n";
    const k3::JobReport r = k3::run_job(pipeline(mine, {"job.load_state=" + state.string()}));
    CHECK(r.result.prompt == std::vector<std::uint32_t>{7, 8});
  }
}
