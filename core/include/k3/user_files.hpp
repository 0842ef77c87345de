// The files a user names: what k3host reads from them and where it may write
// (docs/architecture.md, "Files a user names"). Every file a user names is read through
// read_user_file (or, for a reader that streams, after check_input_file): a regular file
// (symbolic links followed) no larger than the cap of its kind, checked before a byte is
// read, so that /dev/zero, a FIFO or a 50 GB shard given by mistake is refused at once
// instead of read until memory runs out or forever. Every file k3host writes is checked by
// check_output_file: absent or a regular file, never a symbolic link, a device, a FIFO, a
// socket or a folder (the atomic writer renames over its target, which would replace any
// of them), and outside the checkpoint folders of the run.
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace k3 {

// Caps on what k3host reads into memory, in decimal units like every size it prints.
/// A prompt file (job.prompt_file, -f): the largest context (memory.context, 1,048,576
/// tokens) holds a few MB of text; 64 MB is far above any prompt that fits.
inline constexpr std::uint64_t kMaxPromptFileBytes = 64'000'000;
/// A corpus read whole and tokenised in memory (job.speculative.datastore, the text of
/// `k3host perplexity`, the input of `k3host tokenize`): its ids and their index take a
/// few times its size.
inline constexpr std::uint64_t kMaxTextFileBytes = 1'000'000'000;
/// A chat history (JSON Lines): every id of a conversation the context holds, a few bytes
/// each, plus its text.
inline constexpr std::uint64_t kMaxHistoryFileBytes = 256'000'000;
/// A small YAML file that is not a pipeline (a trace preset, a model geometry).
inline constexpr std::uint64_t kMaxSmallYamlBytes = 1'000'000;

/// "a FIFO", "a character device", "a folder", "a symbolic link", ... for a stat mode.
[[nodiscard]] std::string_view file_type_name(unsigned int mode) noexcept;

/// The size of `file` when it is a regular file (symbolic links followed) of at most
/// `max_bytes`; for a reader that streams the file itself. UsageError
/// "<what>: <file>: <reason>": no such file, "a folder, not a <noun>", "a FIFO, not a
/// <noun>" (any other type), or "N bytes, more than the M (M in MB) a <noun> may hold".
std::uint64_t check_input_file(const std::filesystem::path& file, std::string_view what, std::string_view noun,
                               std::uint64_t max_bytes);

/// The whole of `file`, with check_input_file's checks and messages. It is opened without
/// blocking and checked again on the open descriptor before a byte is read, so a FIFO put
/// in its place meanwhile never hangs, and the read stops at the cap even if the file
/// grows. A read error is a RuntimeError naming the file.
std::string read_user_file(const std::filesystem::path& file, std::string_view what, std::string_view noun,
                           std::uint64_t max_bytes);

/// Refuses `file` as a place to write: UsageError "<what>: <file>: <reason>" when something
/// other than a regular file is there (a symbolic link itself, a device, a FIFO, a socket,
/// a folder), when it cannot be inspected, or when it lies inside one of `keep_out` (the
/// checkpoint folders of the run; symbolic links in either path resolved). `what` names
/// the option or key that gave the path ("--out x: job.report"); empty, the message starts
/// with the file.
void check_output_file(const std::filesystem::path& file, std::string_view what,
                       std::span<const std::filesystem::path> keep_out = {});

}  // namespace k3
