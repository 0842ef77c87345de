// What the http backend knows of a file's version, and how every answer is checked against it
// (pure, so tests can check it alone).
//
// open() records the total size and the validators (ETag, Last-Modified) of its answer. Every
// later range answer must carry the same total size and the same validators, present or
// absent alike: an answer whose ETag or Last-Modified differs, is gone, or appeared, is a
// file that changed on the server while it was being read, and is refused rather than mixed
// with the bytes read before. A range request also asks the server to check itself:
// "If-Match: <ETag>" (a strong ETag only: RFC 9110 compares If-Match strongly, so a weak one
// would always fail), else "If-Unmodified-Since: <Last-Modified>"; a server that honours it
// answers 412 when the file changed. A file with no validator at all cannot be checked by
// anything but its size: open() refuses it unless the backend is told `allow_unvalidated`.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace k3::storage::http {

/// A file's version as the answer at open() showed it.
struct Version {
  std::uint64_t size = 0;
  std::optional<std::string> etag, last_modified;

  [[nodiscard]] bool validated() const noexcept { return etag || last_modified; }
  [[nodiscard]] bool strong_etag() const noexcept { return etag && !etag->starts_with("W/"); }

  /// The precondition header line a range request carries, or empty when there is none.
  [[nodiscard]] std::string precondition() const {
    if (strong_etag()) return "If-Match: " + *etag;
    if (last_modified) return "If-Unmodified-Since: " + *last_modified;
    return {};
  }

  /// Empty when an answer with this total size (absent: the answer did not say) and these
  /// validators is the version seen at open; else what differs, for the message
  /// ("ETag \"a\" at open, now \"b\"").
  [[nodiscard]] std::string differs(std::optional<std::uint64_t> total, const std::optional<std::string>& now_etag,
                                    const std::optional<std::string>& now_last_modified) const {
    if (total && *total != size) return "size " + std::to_string(size) + " at open, now " + std::to_string(*total);
    if (std::string d = compare("ETag", etag, now_etag); !d.empty()) return d;
    return compare("Last-Modified", last_modified, now_last_modified);
  }

 private:
  static std::string compare(std::string_view name, const std::optional<std::string>& then,
                             const std::optional<std::string>& now) {
    if (then == now) return {};
    const auto shown = [](const std::optional<std::string>& v) { return v ? "'" + *v + "'" : std::string("none"); };
    return std::string(name) + " " + shown(then) + " at open, now " + shown(now);
  }
};

/// The message of an answer that belongs to another version of the file.
inline std::string changed_message(std::string_view where, std::string_view what) {
  return std::string(where) + ": the file changed on the server while reading (" + std::string(what) +
         "); refusing to mix two versions";
}

}  // namespace k3::storage::http
