// Text renderings of a SimReport: terminal table, CSV and JSON.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <k3/sim.hpp>

#include "util/atomic_file.hpp"

namespace k3 {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pad(const std::string& s, std::size_t width, bool right) {
  if (s.size() >= width) return s;
  const std::string fill(width - s.size(), ' ');
  return right ? fill + s : s + fill;
}

// Policies and capacity columns in first-seen order.
template <class Key>
std::vector<Key> ordered_unique(const std::vector<SimResult>& results, Key (*key)(const SimResult&)) {
  std::vector<Key> out;
  for (const SimResult& r : results) {
    const Key k = key(r);
    bool seen = false;
    for (const Key& o : out) seen = seen || o == k;
    if (!seen) out.push_back(k);
  }
  return out;
}
std::string policy_of(const SimResult& r) { return r.policy; }
std::string capacity_of(const SimResult& r) { return r.capacity_text; }

}  // namespace

std::string sim_table(const SimReport& rep) {
  std::string out;
  const TraceStats& s = rep.stats;
  out += "trace " + rep.trace_file + ": " + std::to_string(s.requests) + " requests, " + std::to_string(s.tokens) +
         " tokens in " + std::to_string(s.groups) + " serving groups (up to " + std::to_string(s.max_group) +
         " experts), " + std::to_string(s.distinct_keys) + " distinct experts, working set " +
         std::to_string(s.working_set) + " slots/token (" + std::to_string(s.layers_used) + " layers x top-" +
         std::to_string(rep.header.top_k) + ")\n";
  out += "expert " + std::to_string(rep.expert_bytes) + " B, bandwidth " + fmt("%g", rep.bandwidth_gbps) +
         " GB/s; compulsory-miss ceiling " +
         fmt("%.2f%%", s.requests == 0 ? 0.0
                                       : 100.0 * static_cast<double>(s.requests - s.distinct_keys) /
                                             static_cast<double>(s.requests)) +
         "\n\n";
  const std::vector<std::string> head = {"policy",        "capacity", "slots",       "hit rate",
                                         "GB read/token", "s/token",  "Mreq/s wall", "Mreq/s cpu"};
  std::vector<std::vector<std::string>> rows;
  for (const SimResult& r : rep.results) {
    const auto mreq = [&](double secs) { return secs > 0 ? static_cast<double>(r.counts.requests) / secs / 1e6 : 0.0; };
    rows.push_back({r.policy, r.capacity_text, std::to_string(r.capacity_slots), fmt("%.2f%%", 100.0 * r.hit_rate()),
                    fmt("%.3f", rep.bytes_per_token(r) / 1e9), fmt("%.3f", rep.seconds_per_token(r)),
                    fmt("%.2f", mreq(r.counts.seconds)), fmt("%.2f", mreq(r.counts.cpu_seconds))});
  }
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  const auto line = [&](const std::vector<std::string>& row) {
    std::string l;
    for (std::size_t c = 0; c < row.size(); ++c) l += (c ? "  " : "") + pad(row[c], width[c], c >= 2);
    return l + "\n";
  };
  out += line(head);
  for (const auto& row : rows) out += line(row);

  // Hit-rate matrix: capacities down, policies across (the shape docs/cache.md uses).
  const auto policies = ordered_unique<std::string>(rep.results, policy_of);
  const auto capacities = ordered_unique<std::string>(rep.results, capacity_of);
  if (policies.size() > 1 && capacities.size() > 1) {
    std::map<std::pair<std::string, std::string>, const SimResult*> at;
    for (const SimResult& r : rep.results) at[{r.capacity_text, r.policy}] = &r;
    std::vector<std::string> mh = {"capacity", "slots"};
    mh.insert(mh.end(), policies.begin(), policies.end());
    std::vector<std::vector<std::string>> mrows;
    for (const std::string& c : capacities) {
      std::vector<std::string> row = {c, ""};
      for (const std::string& p : policies) {
        const auto it = at.find({c, p});
        if (it == at.end()) {
          row.push_back("-");
          continue;
        }
        row[1] = std::to_string(it->second->capacity_slots);
        row.push_back(fmt("%.2f%%", 100.0 * it->second->hit_rate()));
      }
      mrows.push_back(row);
    }
    std::vector<std::size_t> mw(mh.size());
    for (std::size_t c = 0; c < mh.size(); ++c) {
      mw[c] = mh[c].size();
      for (const auto& row : mrows) mw[c] = std::max(mw[c], row[c].size());
    }
    out += "\nhit rate by capacity\n";
    const auto mline = [&](const std::vector<std::string>& row) {
      std::string l;
      for (std::size_t c = 0; c < row.size(); ++c) l += (c ? "  " : "") + pad(row[c], mw[c], c >= 1);
      return l + "\n";
    };
    out += mline(mh);
    for (const auto& row : mrows) out += mline(row);
  }
  return out;
}

std::string sim_csv(const SimReport& rep) {
  std::string out =
      "policy,capacity,slots,requests,hits,misses,evictions,hit_rate,bytes_per_token,seconds_per_token,"
      "replay_seconds,replay_cpu_seconds,requests_per_second\n";
  for (const SimResult& r : rep.results) {
    const double rps = r.counts.seconds > 0 ? static_cast<double>(r.counts.requests) / r.counts.seconds : 0.0;
    out += r.policy + "," + r.capacity_text + "," + std::to_string(r.capacity_slots) + "," +
           std::to_string(r.counts.requests) + "," + std::to_string(r.counts.hits) + "," +
           std::to_string(r.counts.misses) + "," + std::to_string(r.counts.evictions) + "," +
           fmt("%.6f", r.hit_rate()) + "," + fmt("%.1f", rep.bytes_per_token(r)) + "," +
           fmt("%.6f", rep.seconds_per_token(r)) + "," + fmt("%.6f", r.counts.seconds) + "," +
           fmt("%.6f", r.counts.cpu_seconds) + "," + fmt("%.0f", rps) + "\n";
  }
  return out;
}

std::string sim_json(const SimReport& rep) {
  nlohmann::ordered_json j;
  j["trace"] = {{"file", rep.trace_file},
                {"layers", rep.header.layers},
                {"experts_per_layer", rep.header.experts_per_layer},
                {"top_k", rep.header.top_k},
                {"arch_fingerprint", rep.header.arch_fingerprint},
                {"checkpoint_identity", rep.header.checkpoint_identity},
                {"prompt_hash", rep.header.prompt_hash},
                {"requests", rep.stats.requests},
                {"tokens", rep.stats.tokens},
                {"serving_groups", rep.stats.groups},
                {"max_group_experts", rep.stats.max_group},
                {"distinct_experts", rep.stats.distinct_keys},
                {"working_set_slots", rep.stats.working_set}};
  j["expert_bytes"] = rep.expert_bytes;
  j["bandwidth_gbps"] = rep.bandwidth_gbps;
  auto& results = j["results"] = nlohmann::ordered_json::array();
  for (const SimResult& r : rep.results) {
    results.push_back({{"policy", r.policy},
                       {"capacity", r.capacity_text},
                       {"slots", r.capacity_slots},
                       {"requests", r.counts.requests},
                       {"hits", r.counts.hits},
                       {"misses", r.counts.misses},
                       {"evictions", r.counts.evictions},
                       {"hit_rate", r.hit_rate()},
                       {"bytes_per_token", rep.bytes_per_token(r)},
                       {"seconds_per_token", rep.seconds_per_token(r)},
                       {"replay_seconds", r.counts.seconds},
                       {"replay_cpu_seconds", r.counts.cpu_seconds},
                       {"requests_per_second",
                        r.counts.seconds > 0 ? static_cast<double>(r.counts.requests) / r.counts.seconds : 0.0}});
  }
  return j.dump(2) + "\n";
}

}  // namespace k3

namespace k3 {

void write_report_file(const std::filesystem::path& file, std::string_view content) {
  write_file_atomically(file, content);
}

}  // namespace k3
