// DoctorReport::json(): the report with stable keys (docs/doctor.md lists them). Bytes are
// integers, rates bytes per second, times seconds; a value that was not measured is null.
#include <nlohmann/json.hpp>

#include <k3/doctor.hpp>

namespace k3 {

namespace {

using nlohmann::json;

json or_null(double v) { return v > 0 ? json(v) : json(nullptr); }

json forecast_json(const DoctorForecast& f) {
  json j = {{"name", f.name},
            {"file", f.file.string()},
            {"fixed_budgets", f.fixed_budgets},
            {"total_bytes", f.total_bytes},
            {"fits", f.fits && f.error.empty()},
            {"resident", f.resident},
            {"bytes_per_token",
             {{"trunk", f.trunk_bytes},
              {"experts", f.expert_bytes},
              {"tables", f.table_bytes},
              {"total", f.bytes_per_token()}}},
            {"expert_hit_rate", f.expert_hit_rate},
            {"io_seconds_per_token", f.io_seconds},
            {"compute_seconds_per_token", f.compute_seconds},
            {"seconds_per_token", or_null(f.seconds_per_token)}};
  j["error"] = f.error.empty() ? json(nullptr) : json(f.error);
  return j;
}

nlohmann::json disk_test_json(const machine::DiskBench& d) {
  nlohmann::json passes = nlohmann::json::array();
  for (const auto& p : d.passes)
    passes.push_back({{"depth", p.depth},
                      {"requests", p.requests},
                      {"bytes", p.bytes},
                      {"seconds", p.seconds},
                      {"bytes_per_second", p.bytes_per_second()}});
  return {{"folder", d.folder.string()},
          {"filesystem", d.filesystem},
          {"temporary_file", d.temporary_file},
          {"o_direct", d.o_direct},
          {"note", d.note},
          {"request_bytes", d.request_bytes},
          {"span_bytes", d.span_bytes},
          {"passes", passes},
          {"bytes_per_second", d.best_bytes_per_second()}};
}

json shape_json(const DoctorShape& s) { return {{"rows", s.rows}, {"cols", s.cols}}; }

/// What a model's forecasts were computed from: the request size its disk rate was read
/// with, and the shapes its kernel rates were measured on.
json measured_json(const DoctorMeasurement& m) {
  json bf16 = shape_json(m.shapes.bf16);
  bf16["rows_of_model"] = m.shapes.bf16_rows_of_model;
  bf16["bytes"] = m.shapes.bf16_bytes();
  json matrices = json::array();
  for (const auto& e : m.shapes.expert) matrices.push_back(shape_json(e));
  return {{"disk_request_bytes", m.disk_request_bytes == 0 ? json(nullptr) : json(m.disk_request_bytes)},
          {"disk_bytes_per_second", or_null(m.disk_bytes_per_second)},
          {"bf16", bf16},
          {"mxfp4_expert", {{"matrices", matrices}, {"bytes", m.shapes.expert_bytes()}}},
          {"bf16_bytes_per_second", or_null(m.bf16_bytes_per_second)},
          {"mxfp4_bytes_per_second", or_null(m.mxfp4_bytes_per_second)}};
}

}  // namespace

std::string DoctorReport::json() const {
  nlohmann::json j;
  j["pipeline"] = pipeline_file.string();
  nlohmann::json features = nlohmann::json::object();
  for (const auto& f : cpu.features) features[f.name] = f.present;
  j["cpu"] = {{"arch", cpu.arch}, {"model", cpu.model}, {"features", features}};
  nlohmann::json sets = nlohmann::json::array();
  for (const auto& k : kernel_sets) sets.push_back({{"name", k.name}, {"score", k.score}, {"runnable", k.score > 0}});
  j["kernels"] = {{"requested", kernels_requested},
                  {"chosen", kernels_chosen.empty() ? nlohmann::json(nullptr) : nlohmann::json(kernels_chosen)},
                  {"sets", sets}};
  j["cores"] = {{"logical", cores.logical},
                {"physical", cores.physical == 0 ? nlohmann::json(nullptr) : nlohmann::json(cores.physical)},
                {"affinity", cores.affinity},
                {"affinity_list", cores.affinity_list},
                {"cgroup_cpus", cores.cgroup_cpus ? nlohmann::json(*cores.cgroup_cpus) : nlohmann::json(nullptr)},
                {"cgroup_source", cores.cgroup_source},
                {"usable", cores.usable()},
                {"threads", threads}};
  j["memory"] = {{"total_bytes", memory.total},
                 {"available_bytes", memory.available},
                 {"cgroup_limit_bytes",
                  memory.cgroup_limit ? nlohmann::json(*memory.cgroup_limit) : nlohmann::json(nullptr)},
                 {"cgroup_usage_bytes", memory.cgroup_usage},
                 {"cgroup_source", memory.cgroup_source},
                 {"usable_bytes", usable_memory},
                 {"usable_source", usable_source}};
  j["openmp"] = {
      {"wait_policy", openmp.effective()},
      {"wait_policy_env", openmp.wait_policy.empty() ? nlohmann::json(nullptr) : nlohmann::json(openmp.wait_policy)},
      {"spincount_env", openmp.spincount.empty() ? nlohmann::json(nullptr) : nlohmann::json(openmp.spincount)},
      {"set_by", openmp.set_by()},
      {"reexec_error", openmp.reexec_error.empty() ? nlohmann::json(nullptr) : nlohmann::json(openmp.reexec_error)},
      {"summary", openmp.describe()}};
  nlohmann::json disk_j = {{"model_path", model_path},
                           {"checkpoint_present", checkpoint_present},
                           {"shards", shards.size()}};
  if (!disks.empty()) {
    // The keys of the pipeline's model's test, then every test (one per expert size).
    disk_j.update(disk_test_json(disks.front()));
    nlohmann::json tests = nlohmann::json::array();
    for (const auto& d : disks) tests.push_back(disk_test_json(d));
    disk_j.update({{"tested", true}, {"tests", tests}, {"skipped", nullptr}});
  } else {
    disk_j.update({{"tested", false},
                   {"bytes_per_second", nullptr},
                   {"tests", nlohmann::json::array()},
                   {"skipped", disk_skipped}});
  }
  j["disk"] = disk_j;
  j["page_cache"] = {{"files", page_cache.files},
                     {"bytes", page_cache.bytes},
                     {"resident_bytes", page_cache.resident},
                     {"resident_fraction", page_cache.bytes ? static_cast<double>(page_cache.resident) /
                                                                  static_cast<double>(page_cache.bytes)
                                                            : 0.0}};
  // The pipeline's model's rates (each model's own: models[].measured).
  const DoctorMeasurement none;
  const DoctorMeasurement& first = models.empty() ? none : models.front().measured;
  j["compute"] = {{"kernel_set", kernels_chosen},
                  {"threads", threads},
                  {"bf16_bytes_per_second", or_null(first.bf16_bytes_per_second)},
                  {"mxfp4_bytes_per_second", or_null(first.mxfp4_bytes_per_second)}};
  nlohmann::json models_j = nlohmann::json::array();
  for (const auto& m : models) {
    nlohmann::json presets = nlohmann::json::array();
    for (const auto& f : m.presets) presets.push_back(forecast_json(f));
    models_j.push_back(
        {{"name", m.name},
         {"source", m.source},
         {"primary", m.primary},
         {"measured", measured_json(m.measured)},
         {"presets", presets},
         {"pipeline", forecast_json(m.pipeline)},
         {"recommended", m.recommended.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.recommended)}});
  }
  j["models"] = models_j;
  const std::string rec = recommended();
  j["recommended_preset"] = rec.empty() ? nlohmann::json(nullptr) : nlohmann::json(rec);
  nlohmann::json findings_j = nlohmann::json::array();
  for (const auto& f : findings)
    findings_j.push_back({{"section", f.section},
                          {"severity", to_string(f.severity)},
                          {"message", f.message},
                          {"exit_code", f.exit_code}});
  j["findings"] = findings_j;
  j["exit_code"] = exit_code();
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace k3
