// Token selection: greedy takes the first maximum; sampling is reproducible from
// (seed, position) and honours temperature, top-k and top-p.
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include <k3/generate.hpp>

TEST_CASE("greedy picks the first index of the maximum", "[sampler]") {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  k3::SamplingSettings s;
  CHECK(k3::sample_token(logits.data(), logits.size(), s, 0) == 1);
  CHECK(k3::sample_token(logits.data(), logits.size(), s, 7) == 1);
}

TEST_CASE("seeded sampling depends only on seed and position", "[sampler]") {
  std::vector<float> logits(50);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  k3::SamplingSettings s;
  s.temperature = 1.0;
  s.seed = 42;
  std::vector<std::uint32_t> a, b;
  for (int p = 0; p < 40; ++p) a.push_back(k3::sample_token(logits.data(), logits.size(), s, p));
  for (int p = 0; p < 40; ++p) b.push_back(k3::sample_token(logits.data(), logits.size(), s, p));
  CHECK(a == b);
  s.seed = 43;
  std::vector<std::uint32_t> c;
  for (int p = 0; p < 40; ++p) c.push_back(k3::sample_token(logits.data(), logits.size(), s, p));
  CHECK(a != c);
}

TEST_CASE("top-k limits the candidates to the k largest logits", "[sampler]") {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.9f, -2.0f, 2.8f};
  k3::SamplingSettings s;
  s.temperature = 5.0;  // flat enough that every candidate appears
  s.top_k = 2;
  std::map<std::uint32_t, int> seen;
  for (int p = 0; p < 400; ++p) ++seen[k3::sample_token(logits.data(), logits.size(), s, p)];
  CHECK(seen.size() == 2);
  CHECK(seen.count(1) == 1);
  CHECK(seen.count(3) == 1);
}

TEST_CASE("top-p keeps the smallest set reaching the probability", "[sampler]") {
  // Probabilities at temperature 1: e^2, e^1, e^0, e^-5 normalised ≈ 0.665, 0.245, 0.090, 0.0004.
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -5.0f};
  k3::SamplingSettings s;
  s.temperature = 1.0;
  s.top_p = 0.8;  // 0.665 < 0.8 ≤ 0.665 + 0.245: ids 0 and 1 only
  std::map<std::uint32_t, int> seen;
  for (int p = 0; p < 400; ++p) ++seen[k3::sample_token(logits.data(), logits.size(), s, p)];
  CHECK(seen.size() == 2);
  CHECK(seen.count(0) == 1);
  CHECK(seen.count(1) == 1);
  // Frequencies follow the renormalised probabilities 0.731 / 0.269 (loose bound, 400 draws).
  CHECK(seen[0] > seen[1]);
}
