// Reading the small text files of /proc and /sys (and the cgroup tree) under a root folder,
// so that the probes run against a fake tree in tests. Every reader returns nothing for a
// file that is missing or not what it should be: a machine without a cgroup limit or a
// topology folder is normal.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace k3::machine::sys {

/// The first line of `file` (no newline); nullopt when it cannot be read.
std::optional<std::string> first_line(const std::filesystem::path& file);
/// A whole small file; nullopt when it cannot be read.
std::optional<std::string> whole(const std::filesystem::path& file);
/// A decimal number that is a file's first word; nullopt for "max", -1, a missing file or text.
std::optional<std::uint64_t> number(const std::filesystem::path& file);

/// `root`/"sys/fs/cgroup" followed by our cgroup v2 path ("0::/a/b" in proc/self/cgroup),
/// then each parent up to and including `root`/"sys/fs/cgroup": the tightest limit on the
/// path applies. Just the cgroup root when proc/self/cgroup has no v2 line.
std::vector<std::filesystem::path> cgroup_v2_path_up(const std::filesystem::path& root);
/// The cgroup v1 folder of `controller` ("memory", "cpu"): its mount under sys/fs/cgroup
/// (also "cpu,cpuacct") plus our path in it when that exists, else the mount itself;
/// nullopt when there is no such mount.
std::optional<std::filesystem::path> cgroup_v1_dir(const std::filesystem::path& root, const std::string& controller);

}  // namespace k3::machine::sys
