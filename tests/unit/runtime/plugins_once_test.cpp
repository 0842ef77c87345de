// A run creates each of its plugin objects once: the job checks the pipeline's storage,
// cache and kernels sections by creating them (k3/pipeline_plugins.hpp) and hands those
// objects to the model, and to the draft model. The host counts what it creates
// (PluginHost::created).
#include <catch2/catch.hpp>

#include <k3/job.hpp>
#include <k3/model.hpp>
#include <k3/pipeline.hpp>
#include <k3/plugin_host.hpp>

#include "test_models.hpp"

namespace {

k3::test::ScratchCleanup cleanup;

k3::Pipeline pipeline(std::vector<std::string> extra) {
  std::vector<std::string> sets = {"model.path=" + k3::test::test_model("tiny").string(),
                                   "model.generate_if_missing=false",
                                   "job.ids=[3,14,15,92]",
                                   "job.max_new_tokens=3",
                                   "job.stop_at_eos=false",
                                   "job.report=''",
                                   "threads=1",
                                   "kernels.set=auto"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return k3::load_pipeline(std::string(K3_SOURCE_DIR) + "/configs/default.yaml", sets);
}

}  // namespace

TEST_CASE("a run creates its storage, cache and kernel objects once each", "[job][plugins]") {
  struct Case {
    const char* name;
    std::vector<std::string> sets;
    bool streams;
  };
  const std::string draft = "job.speculative.draft_model=" + k3::test::test_model("tiny").string();
  for (const Case& c :
       {Case{"resident", {"memory.trunk_gb=1000", "memory.expert_cache_gb=1000"}, false},
        Case{"streamed", {"memory.trunk_gb=0.0001", "memory.expert_cache_gb=0.00001"}, true},
        // The draft model runs on the run's own storage backend and kernel set.
        Case{"with a draft model",
             {"memory.trunk_gb=1000", "memory.expert_cache_gb=1000", draft, "job.speculative.max_draft=2"},
             false}}) {
    DYNAMIC_SECTION(c.name) {
      const k3::Pipeline p = pipeline(c.sets);
      k3::PluginHost host(p.plugin_path());
      const k3::JobReport r = k3::run_job(p, host);
      REQUIRE(r.result.generated.size() == 3);
      CHECK(r.streaming == c.streams);
      CHECK(host.created(k3::PluginKind::storage) == 1);
      CHECK(host.created(k3::PluginKind::cache) == 1);
      CHECK(host.created(k3::PluginKind::kernels) == 1);
      CHECK(host.created(k3::PluginKind::tokenizer) == 1);
    }
  }
}

TEST_CASE("the host counts every object it creates", "[plugins]") {
  // The counter itself: a model built from the host creates one of each kind per model.
  k3::PluginHost host;
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.threads = 1;
  s.memory.trunk_gb = 1000;
  s.memory.expert_cache_gb = 1000;
  s.memory.context = 16;
  {
    k3::Model a(k3::test::test_model("tiny"), host, s);
    k3::Model b(k3::test::test_model("tiny"), host, s);
  }
  CHECK(host.created(k3::PluginKind::storage) == 2);
  CHECK(host.created(k3::PluginKind::cache) == 2);
  CHECK(host.created(k3::PluginKind::kernels) == 2);
  CHECK(host.created(k3::PluginKind::tokenizer) == 0);
  // Objects made elsewhere and handed in are not the host's to count.
  k3::ModelPlugins plugins = k3::create_model_plugins(host, s);
  CHECK(host.created(k3::PluginKind::storage) == 3);
  k3::Model c(k3::test::test_model("tiny"), std::move(plugins), s);
  CHECK(host.created(k3::PluginKind::storage) == 3);
  CHECK(host.created(k3::PluginKind::kernels) == 3);
  CHECK(c.kernel_set() == "scalar");
}
