// BenchInfo and BenchSample as JSON: what a bench worker sends its parent (one line per
// message) and what bench_json() prints. Raw counts and seconds only, so a value read back
// is the value sent (nlohmann writes doubles that read back exactly).
#pragma once
#include <nlohmann/json.hpp>

#include <k3/bench.hpp>

namespace k3 {

void to_json(nlohmann::json& j, const BenchInfo& info);
void from_json(const nlohmann::json& j, BenchInfo& info);
void to_json(nlohmann::json& j, const BenchSample& sample);
void from_json(const nlohmann::json& j, BenchSample& sample);

}  // namespace k3
