// config.json, through parse_model_config (what read_model_config does with the file's
// text). Oracle: an accepted config has the invariants the rest of k3host relies on
// (positive sizes, MLA layers sorted and inside the model, top-k within the experts) and a
// stable fingerprint.
#include <algorithm>

#include <k3/model_config.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(k3::fuzz::as_text(data, size));
  k3::fuzz::guarded([&] {
    const k3::ModelConfig c = k3::parse_model_config(text, "config.json");
    k3::fuzz::check(c.hidden_size > 0 && c.num_hidden_layers > 0 && c.vocab_size > 0, "a size is not positive");
    k3::fuzz::check(std::is_sorted(c.mla_layers.begin(), c.mla_layers.end()), "mla_layers not sorted");
    for (auto l : c.mla_layers) k3::fuzz::check(l >= 0 && l < c.num_hidden_layers, "an MLA layer outside the model");
    k3::fuzz::check(c.num_experts_per_token <= c.num_experts, "top-k above the experts");
    k3::fuzz::check(c.fingerprint() == k3::parse_model_config(text, "config.json").fingerprint(),
                    "fingerprint unstable");
  });
  return 0;
}
