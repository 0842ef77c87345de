// k3host's data folder: the presets, configs/default.yaml and the model geometries.
//
// It is found the way the plugins are (core/src/plugin_host/plugin_host.cpp), relative to
// libk3core itself: <folder of libk3core>/k3host/data. Installed, that is a relative link to
// <prefix>/share/k3host, so a moved prefix keeps working; in a build tree it is a folder of
// links to the source tree's presets/ and configs/ (packaging/CMakeLists.txt makes both).
// So a build never reads an installed copy's data, and an install never reads a build's.
#pragma once
#include <filesystem>

namespace k3 {

/// <folder of libk3core>/k3host/data, as found (not resolved: it may not exist when the
/// install is broken; every lookup below then names the path it tried).
std::filesystem::path data_dir();

/// data_dir() / `relative`, with the links resolved (weakly_canonical): in a build tree
/// data_path("presets") is the source tree's presets/, so a pipeline's relative paths
/// (extends: ../configs/default.yaml, model.path: ../data/models/fortune) resolve in the source tree.
std::filesystem::path data_path(const std::filesystem::path& relative);

}  // namespace k3
