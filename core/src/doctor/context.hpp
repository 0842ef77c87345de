// What every step of run_doctor() shares: the pipeline, the options, the report it fills,
// and the models it forecasts (doctor.cpp, measure.cpp).
#pragma once
#include <string>
#include <utility>

#include <k3/doctor.hpp>
#include <k3/model_config.hpp>
#include <k3/pipeline.hpp>

namespace k3::doctor {

struct Context {
  const Pipeline& p;
  const DoctorOptions& o;
  DoctorReport& r;
  void add(const char* section, DoctorSeverity s, std::string message, int code = 0) const {
    r.findings.push_back({section, s, std::move(message), code});
  }
  void status(const std::string& line) const {
    if (o.on_status) o.on_status(line);
  }
};

/// A model to forecast: its config, and the report entry its measurement and plans go in.
struct ModelToForecast {
  ModelConfig config;
  DoctorModel info;
};

}  // namespace k3::doctor
