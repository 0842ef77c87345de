// Token selection: greedy takes the first maximum; sampling is reproducible from
// (seed, position) and honours temperature, top-k, top-p, min-p and the repeat penalty.
#include <catch2/catch.hpp>

#include <cmath>
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

TEST_CASE("the repeat penalty divides positive and multiplies negative logits of the window's ids", "[sampler]") {
  k3::SamplingSettings s;  // greedy
  s.repeat_penalty = 1.1;
  const std::vector<float> pos = {2.0f, 1.9f, 0.5f};
  // 2.0 / 1.1 = 1.818... < 1.9: id 1 wins once id 0 is in the window.
  const std::vector<std::uint32_t> context = {0, 2, 0};
  CHECK(k3::sample_token(pos.data(), pos.size(), s, 0) == 0);  // no context: nothing to penalise
  CHECK(k3::sample_token(pos.data(), pos.size(), s, 0, context) == 1);
  // Only the last repeat_last_n ids count: a window of 1 holds id 0 of {0, 2, 0}, not of {0, 2}.
  s.repeat_last_n = 1;
  const std::vector<std::uint32_t> older = {0, 2};
  CHECK(k3::sample_token(pos.data(), pos.size(), s, 0, older) == 0);
  CHECK(k3::sample_token(pos.data(), pos.size(), s, 0, context) == 1);
  // A negative logit is multiplied: -1.0 * 1.1 = -1.1 < -1.05.
  s.repeat_last_n = 64;
  const std::vector<float> neg = {-1.0f, -1.05f};
  const std::vector<std::uint32_t> first = {0};
  CHECK(k3::sample_token(neg.data(), neg.size(), s, 0, first) == 1);
  // An id counts once however often it repeats (llama.cpp's repeat penalty, not frequency).
  s.repeat_penalty = 1.04;  // 2.0 / 1.04 = 1.923 > 1.9 (twice would be 1.849 < 1.9)
  CHECK(k3::sample_token(pos.data(), pos.size(), s, 0, context) == 0);
  // Off: a window of 0 ids.
  s.repeat_penalty = 1.1;
  s.repeat_last_n = 0;
  CHECK(k3::sample_token(pos.data(), pos.size(), s, 0, context) == 0);
  CHECK(k3::repeat_window(s, context).empty());
  s.repeat_last_n = -1;  // the whole context
  CHECK(k3::repeat_window(s, context).size() == context.size());
}

TEST_CASE("a repeat penalty of 1 changes no draw", "[sampler]") {
  std::vector<float> logits(300);
  std::vector<std::uint32_t> context;
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>((i * 37) % 101) * 0.05f - 2.0f;
  for (std::uint32_t i = 0; i < 200; ++i) context.push_back((i * 13) % 300);
  k3::SamplingSettings plain;
  plain.temperature = 0.9;
  plain.top_k = 50;
  plain.seed = 5;
  k3::SamplingSettings one = plain;
  one.repeat_penalty = 1.0;
  one.repeat_last_n = -1;
  for (std::int64_t p = 0; p < 200; ++p)
    REQUIRE(k3::sample_token(logits.data(), logits.size(), one, p, context) ==
            k3::sample_token(logits.data(), logits.size(), plain, p));
  CHECK_FALSE(one.penalizes());
}

TEST_CASE("min-p keeps the tokens at least min_p times as likely as the first", "[sampler]") {
  // Probabilities at temperature 1: 0.5, 0.3, 0.1, 0.1; min_p 0.3 keeps p >= 0.15: ids 0 and 1.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.1f), std::log(0.1f)};
  k3::SamplingSettings s;
  s.temperature = 1.0;
  s.min_p = 0.3;
  std::map<std::uint32_t, int> seen;
  for (int p = 0; p < 400; ++p) ++seen[k3::sample_token(logits.data(), logits.size(), s, p)];
  CHECK(seen.size() == 2);
  CHECK(seen.count(0) == 1);
  CHECK(seen.count(1) == 1);
  s.min_p = 0.0;  // off: every token is drawn at some position
  seen.clear();
  for (int p = 0; p < 400; ++p) ++seen[k3::sample_token(logits.data(), logits.size(), s, p)];
  CHECK(seen.size() == 4);
}
