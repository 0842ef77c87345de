// The data behind k3::Pipeline: the merged, checked and completed tree.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <k3/pipeline.hpp>

#include "config/config_node.hpp"

namespace k3 {

struct Pipeline::Impl {
  std::filesystem::path file;      ///< as given to load_pipeline
  std::vector<std::string> files;  ///< the extends chain, most basic first, as displayed
  config::ConfigNode root;         ///< every schema key present, canonical values
};

}  // namespace k3
