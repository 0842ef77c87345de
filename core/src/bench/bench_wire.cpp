#include "bench/bench_wire.hpp"

namespace k3 {
namespace {

nlohmann::json io_json(const BenchIo& io) {
  return {{"expert_bytes", io.expert_bytes},       {"trunk_bytes", io.trunk_bytes},
          {"table_bytes", io.table_bytes},         {"expert_requests", io.expert_requests},
          {"expert_hits", io.expert_hits},         {"prefetch_hits", io.prefetch_hits},
          {"io_wait_seconds", io.io_wait_seconds}, {"expert_io_wait_seconds", io.expert_wait_seconds}};
}

BenchIo io_of(const nlohmann::json& j) {
  BenchIo io;
  j.at("expert_bytes").get_to(io.expert_bytes);
  j.at("trunk_bytes").get_to(io.trunk_bytes);
  j.at("table_bytes").get_to(io.table_bytes);
  j.at("expert_requests").get_to(io.expert_requests);
  j.at("expert_hits").get_to(io.expert_hits);
  j.at("prefetch_hits").get_to(io.prefetch_hits);
  j.at("io_wait_seconds").get_to(io.io_wait_seconds);
  j.at("expert_io_wait_seconds").get_to(io.expert_wait_seconds);
  return io;
}

}  // namespace

void to_json(nlohmann::json& j, const BenchInfo& i) {
  j = {{"model", i.model},
       {"kernels", i.kernels},
       {"storage", i.storage},
       {"cache_policy", i.cache_policy},
       {"mode", i.mode},
       {"threads", i.threads},
       {"streaming", i.streaming},
       {"plan_bytes", i.plan_bytes},
       {"load_seconds", i.load_seconds},
       {"context", i.context},
       {"prompt_text", i.prompt_text},
       {"prompt_ids", i.prompt_ids},
       {"new_tokens", i.new_tokens},
       {"warmup_tokens", i.warmup_tokens},
       {"streams", i.streams},
       {"warmup_seconds", i.warmup_seconds},
       {"warmup_expert_failures", i.warmup_expert_failures}};
}

void from_json(const nlohmann::json& j, BenchInfo& i) {
  j.at("model").get_to(i.model);
  j.at("kernels").get_to(i.kernels);
  j.at("storage").get_to(i.storage);
  j.at("cache_policy").get_to(i.cache_policy);
  j.at("mode").get_to(i.mode);
  j.at("threads").get_to(i.threads);
  j.at("streaming").get_to(i.streaming);
  j.at("plan_bytes").get_to(i.plan_bytes);
  j.at("load_seconds").get_to(i.load_seconds);
  j.at("context").get_to(i.context);
  j.at("prompt_text").get_to(i.prompt_text);
  j.at("prompt_ids").get_to(i.prompt_ids);
  j.at("new_tokens").get_to(i.new_tokens);
  j.at("warmup_tokens").get_to(i.warmup_tokens);
  j.at("streams").get_to(i.streams);
  j.at("warmup_seconds").get_to(i.warmup_seconds);
  j.at("warmup_expert_failures").get_to(i.warmup_expert_failures);
}

void to_json(nlohmann::json& j, const BenchSample& s) {
  j = {{"prompt_tokens", s.prompt_tokens},     {"generated_ids", s.generated},
       {"prefill_seconds", s.prefill_seconds}, {"decode_seconds", s.decode.seconds},
       {"decode_forwards", s.decode.forwards}, {"prefill_io", io_json(s.prefill_io)},
       {"decode_io", io_json(s.decode_io)},    {"peak_rss_bytes", s.peak_rss},
       {"interrupted", s.interrupted},         {"expert_failures", s.expert_failures}};
}

void from_json(const nlohmann::json& j, BenchSample& s) {
  j.at("prompt_tokens").get_to(s.prompt_tokens);
  j.at("generated_ids").get_to(s.generated);
  j.at("prefill_seconds").get_to(s.prefill_seconds);
  j.at("decode_seconds").get_to(s.decode.seconds);
  j.at("decode_forwards").get_to(s.decode.forwards);
  s.prefill_io = io_of(j.at("prefill_io"));
  s.decode_io = io_of(j.at("decode_io"));
  j.at("peak_rss_bytes").get_to(s.peak_rss);
  j.at("interrupted").get_to(s.interrupted);
  j.at("expert_failures").get_to(s.expert_failures);
}

}  // namespace k3
