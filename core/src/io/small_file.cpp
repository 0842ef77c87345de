#include "io/small_file.hpp"

#include <k3/error.hpp>

#include "io/read_failure.hpp"

namespace k3::io {
namespace {

std::string too_large(std::string_view uri, std::uint64_t size, std::uint64_t max_bytes) {
  return std::string(uri) + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
         " allowed for this file (is it the right file?)";
}

// A transient failure (a network hiccup, faulty's transient faults) is retried, as the
// weight reads are; a permanent one fails after the last attempt with the plugin's detail.
constexpr int kReadAttempts = 3;

sdk::Status read_retrying(sdk::StorageFile& file, std::uint64_t offset, std::uint64_t length, std::byte* dest,
                          sdk::StatusCode& result) {
  sdk::Status st;
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    sdk::ReadRequest req{offset, length, dest};
    st = file.read({&req, 1});
    result = req.result;
    if ((st.ok() && result == sdk::StatusCode::ok) || !worth_retrying(st.code)) break;
  }
  return st;
}

}  // namespace

std::unique_ptr<sdk::StorageFile> open_file(sdk::StorageBackend& storage, const std::string& uri, std::string_view what,
                                            bool missing_ok) {
  std::unique_ptr<sdk::StorageFile> file;
  const sdk::Status st = storage.open(uri, file);
  if (st.code == sdk::StatusCode::not_found) {
    if (missing_ok) return nullptr;
    throw UsageError(uri + ": " + std::string(what) + " not found (read through the storage plugin: " + st.detail +
                     ")");
  }
  // invalid_argument: the plugin refuses the path itself (a folder, a FIFO): the input is at
  // fault, not the device (exit 2, not 1).
  if (st.code == sdk::StatusCode::invalid_argument)
    throw UsageError(uri + ": cannot open " + std::string(what) + ": " + st.detail);
  if (!st.ok())
    throw_read_failure(st.code,
                       uri + ": cannot open " + std::string(what) + " through the storage plugin: " + st.detail);
  if (!file) throw RuntimeError(uri + ": the storage plugin reported success but returned no file");
  return file;
}

void read_exact(sdk::StorageFile& file, std::uint64_t offset, std::uint64_t length, void* dest,
                const std::string& uri) {
  if (length == 0) return;
  sdk::StatusCode result = sdk::StatusCode::ok;
  const sdk::Status st = read_retrying(file, offset, length, static_cast<std::byte*>(dest), result);
  if (!st.ok() || result != sdk::StatusCode::ok)
    throw_read_failure(st.code, uri + ": cannot read " + std::to_string(length) + " bytes at offset " +
                                    std::to_string(offset) +
                                    " through the storage plugin: " + (st.ok() ? sdk::to_string(result) : st.detail));
}

simdjson::padded_string read_whole(sdk::StorageFile& file, const std::string& uri, std::uint64_t max_bytes) {
  const std::uint64_t size = file.size();
  if (size > max_bytes) throw UsageError(too_large(uri, size, max_bytes));
  simdjson::padded_string out(static_cast<std::size_t>(size));
  read_exact(file, 0, size, out.data(), uri);
  return out;
}

simdjson::padded_string read_small_file(sdk::StorageBackend& storage, const std::string& uri, std::uint64_t max_bytes,
                                        std::string_view what) {
  const auto file = open_file(storage, uri, what);
  return read_whole(*file, uri, max_bytes);
}

sdk::Status try_read_small_file(sdk::StorageBackend& storage, std::string_view uri, std::uint64_t max_bytes,
                                std::string& out) noexcept {
  try {
    std::unique_ptr<sdk::StorageFile> file;
    sdk::Status st = storage.open(uri, file);
    if (!st.ok()) return st;
    if (!file)
      return sdk::Status::error(sdk::StatusCode::internal, std::string(uri) + ": the storage plugin returned no file");
    const std::uint64_t size = file->size();
    if (size > max_bytes) return sdk::Status::error(sdk::StatusCode::invalid_argument, too_large(uri, size, max_bytes));
    out.assign(static_cast<std::size_t>(size), '\0');
    if (size == 0) return sdk::Status::success();
    sdk::StatusCode result = sdk::StatusCode::ok;
    st = read_retrying(*file, 0, size, reinterpret_cast<std::byte*>(out.data()), result);
    if (!st.ok()) return st;
    if (result != sdk::StatusCode::ok)
      return sdk::Status::error(result, std::string(uri) + ": " + sdk::to_string(result));
    return sdk::Status::success();
  } catch (const std::bad_alloc&) {
    return sdk::Status::error(sdk::StatusCode::out_of_memory, std::string(uri) + ": out of memory");
  } catch (const std::exception& e) {
    return sdk::Status::error(sdk::StatusCode::internal, std::string(uri) + ": " + e.what());
  }
}

}  // namespace k3::io
