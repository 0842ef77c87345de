// Session::snapshot()/restore(): the in-memory state copies that prefix reuse (k3host serve)
// relies on. A restored session must be indistinguishable from one that never left the
// snapshot's point: the logits of what it is fed next are bit-identical.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include <k3/error.hpp>
#include <k3/model.hpp>
#include <k3/plugin_host.hpp>

#include "test_models.hpp"

namespace {

using k3::test::test_model;

k3::test::ScratchCleanup cleanup;

std::vector<std::uint32_t> ids_of(const k3::ModelConfig& c, std::size_t n, std::uint64_t seed) {
  std::vector<std::uint32_t> ids;
  std::uint64_t x = seed;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<std::uint32_t>((x >> 33) % static_cast<std::uint64_t>(c.vocab_size)));
  }
  return ids;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

k3::ModelSettings scalar_settings() {
  k3::ModelSettings s;
  s.kernels = "scalar";
  s.threads = 1;
  return s;
}

}  // namespace

TEST_CASE("a restored snapshot continues bit for bit after the session went elsewhere", "[model][identity][snapshot]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, scalar_settings());
  const auto a = ids_of(m.config(), 13, 1), b = ids_of(m.config(), 9, 2), detour = ids_of(m.config(), 17, 3);

  // The reference: a, then b, never interrupted.
  std::vector<float> want, got, scratch;
  k3::Session ref(m, 128);
  ref.feed(a, false, scratch);
  ref.feed(b, true, want);

  k3::Session s(m, 128);
  s.feed(a, false, scratch);
  const k3::SessionSnapshot snap = s.snapshot();
  CHECK(snap.position() == static_cast<std::int64_t>(a.size()));
  CHECK(snap.tokens() == a);
  CHECK(snap.bytes() > a.size() * sizeof(std::uint32_t));
  s.feed(detour, false, scratch);  // the KDA state moves on and cannot be rewound
  s.restore(snap);
  CHECK(s.position() == static_cast<std::int64_t>(a.size()));
  CHECK(s.tokens() == a);
  s.feed(b, true, got);
  CHECK(same_bits(got, want));

  // The same snapshot restores again, and into another session, with the same bits.
  k3::Session other(m, 64);
  other.feed(detour, false, scratch);
  other.restore(snap);
  other.feed(b, true, got);
  CHECK(same_bits(got, want));
  s.reset();
  s.restore(snap);
  s.feed(b, true, got);
  CHECK(same_bits(got, want));

  // The detour did not leak into the snapshot: a differs from a+detour's next logits.
  k3::Session d(m, 128);
  d.feed(a, false, scratch);
  d.feed(detour, false, scratch);
  d.feed(b, true, got);
  CHECK_FALSE(same_bits(got, want));
}

TEST_CASE("a snapshot keeps the pending ids", "[model][snapshot]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, scalar_settings());
  k3::Session s(m, 64);
  std::vector<float> logits;
  s.feed(ids_of(m.config(), 5, 6), false, logits);
  s.set_pending({7, 8});
  const auto snap = s.snapshot();
  CHECK(snap.pending() == std::vector<std::uint32_t>{7, 8});
  s.set_pending({});
  s.feed(ids_of(m.config(), 3, 7), false, logits);
  s.restore(snap);
  CHECK(s.pending() == std::vector<std::uint32_t>{7, 8});
  CHECK(s.position() == 5);
}

TEST_CASE("restore refuses an empty snapshot and one longer than the context", "[model][snapshot][errors]") {
  k3::PluginHost host;
  k3::Model m(test_model("tiny"), host, scalar_settings());
  k3::Session s(m, 64), small(m, 8);
  std::vector<float> logits;
  s.feed(ids_of(m.config(), 12, 4), false, logits);
  const auto snap = s.snapshot();
  small.feed(ids_of(m.config(), 3, 5), false, logits);
  CHECK_THROWS_AS(small.restore(snap), k3::UsageError);
  CHECK(small.position() == 3);  // unchanged
  CHECK_THROWS_AS(small.restore(k3::SessionSnapshot{}), k3::UsageError);
  CHECK(k3::SessionSnapshot{}.empty());
  CHECK(k3::SessionSnapshot{}.tokens().empty());
}

TEST_CASE("a model holding a range of layers keeps sequence state for those layers only, as its plan counts",
          "[model][snapshot][cluster]") {
  k3::PluginHost host;
  const std::filesystem::path model = test_model("tiny");
  const auto held = [&](std::size_t first, std::size_t last) {
    k3::ModelSettings s = scalar_settings();
    s.layers = [=](const k3::ModelConfig& c) {
      return std::pair<std::size_t, std::size_t>{first,
                                                 last == 0 ? static_cast<std::size_t>(c.num_hidden_layers) : last};
    };
    k3::Model m(model, host, s);
    k3::Session session(m, 64);
    // A fresh state holds no tokens and no MLA positions: its bytes are the KDA state alone,
    // which the plan counts for the layers this model holds.
    const std::size_t fresh = session.snapshot().bytes();
    CHECK(fresh == m.plan().kda_state_bytes);
    session.reset();
    CHECK(session.snapshot().bytes() == fresh);
    return fresh;
  };
  const std::size_t all = held(0, 0);
  REQUIRE(all > 0);
  const std::size_t front = held(0, 2), middle = held(2, 5), back = held(5, 0);
  CHECK(front < all);
  CHECK(middle < all);
  CHECK(front + middle + back == all);
}
