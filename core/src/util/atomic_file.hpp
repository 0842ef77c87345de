// Writes a whole file so that readers see either the old file or the complete new one:
// write "<file>.tmp.<pid>", fsync, rename over <file>, fsync the directory.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string_view>

namespace k3 {

void write_file_atomically(const std::filesystem::path& file, const void* data, std::size_t size);
inline void write_file_atomically(const std::filesystem::path& file, std::string_view text) {
  write_file_atomically(file, text.data(), text.size());
}

}  // namespace k3
