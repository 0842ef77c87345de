// The doctor's forecast (docs/doctor.md, "The forecast") on the tiny geometry: a resident
// plan reads nothing per token and is bound by compute; a streaming plan reads its streamed
// trunk, the experts its cache misses and the tables it streams, and its I/O time is those
// bytes over the disk rate; an unmeasured rate leaves the s/token unknown (0), never fast.
#include <catch2/catch.hpp>

#include <numeric>

#include <k3/geometry.hpp>
#include <k3/plan.hpp>

#include "doctor/forecast.hpp"

namespace {

k3::ModelConfig tiny() { return k3::load_geometry(std::string(K3_SOURCE_DIR) + "/configs/models/tiny.yaml").config; }

k3::MemoryPlan plan(const k3::ModelConfig& c, double trunk_gb, double cache_gb, bool stream_embedding) {
  k3::PlanInputs in;
  in.trunk_gb = trunk_gb;
  in.expert_cache_gb = cache_gb;
  in.stream_embedding = stream_embedding;
  in.context = 64;
  in.available = 1ull << 40;
  return k3::plan_memory(c, in);
}

}  // namespace

TEST_CASE("forecast: a resident plan reads nothing per token and is bound by compute") {
  const k3::ModelConfig c = tiny();
  const k3::MemoryPlan p = plan(c, 100, 100, false);
  REQUIRE(p.resident());
  k3::DoctorForecast f;
  k3::doctor::forecast(f, c, p, {1e9, 2e9, 1e9}, 1ull << 40);
  CHECK(f.bytes_per_token() == 0);
  CHECK(f.expert_hit_rate == 1.0);
  CHECK(f.io_seconds == 0);
  CHECK(f.compute_seconds > 0);
  CHECK(f.seconds_per_token == f.compute_seconds);
  CHECK(f.fits);
}

TEST_CASE("forecast: a streaming plan reads its streamed trunk, missed experts and streamed tables") {
  const k3::ModelConfig c = tiny();
  const k3::MemoryPlan p = plan(c, 0.00001, 0.0000001, true);  // a ring slot, top-k slots, lm_head in chunks
  REQUIRE(p.streams_trunk());
  REQUIRE(p.streams_experts());
  k3::DoctorForecast f;
  const double disk = 1e8;
  k3::doctor::forecast(f, c, p, {disk, 1e12, 1e12}, 1ull << 40);
  CHECK(f.trunk_bytes == p.streamed_trunk_bytes);
  const double hit = static_cast<double>(p.expert_slots) / static_cast<double>(p.experts_total);
  CHECK(f.expert_hit_rate == Approx(hit));
  const double routed = static_cast<double>((c.num_hidden_layers - c.first_k_dense_replace) * c.num_experts_per_token);
  CHECK(static_cast<double>(f.expert_bytes) ==
        Approx(routed * static_cast<double>(p.expert_slot_bytes) * (1 - hit)).epsilon(1e-6));
  const auto E = static_cast<std::uint64_t>(c.hidden_size), V = static_cast<std::uint64_t>(c.vocab_size);
  CHECK(f.table_bytes == E * 2 + V * E * 2);  // an embedding row and the whole streamed lm_head
  CHECK(f.io_seconds == Approx(static_cast<double>(f.bytes_per_token()) / disk));
  CHECK(f.seconds_per_token == Approx(std::max(f.io_seconds, f.compute_seconds)));

  // More cache, fewer expert bytes; no disk rate, no s/token.
  const k3::MemoryPlan q = plan(c, 0.00001, 1, true);
  k3::DoctorForecast g;
  k3::doctor::forecast(g, c, q, {0, 1e12, 1e12}, 1ull << 40);
  CHECK(g.expert_bytes == 0);
  CHECK(g.bytes_per_token() > 0);
  CHECK(g.io_seconds == 0);
  CHECK(g.seconds_per_token == 0);
}

TEST_CASE("forecast: fits means at most 90% of the usable memory") {
  const k3::ModelConfig c = tiny();
  const k3::MemoryPlan p = plan(c, 100, 100, false);
  k3::DoctorForecast f;
  const auto just = static_cast<std::uint64_t>(static_cast<double>(p.total) / k3::kDoctorMemoryMargin) + 1;
  k3::doctor::forecast(f, c, p, {}, just);
  CHECK(f.fits);
  k3::doctor::forecast(f, c, p, {}, p.total);  // fits the memory, but not with the margin
  CHECK_FALSE(f.fits);
}
