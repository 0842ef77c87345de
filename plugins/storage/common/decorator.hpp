// The two halves every storage decorator (throttle, faulty, synthetic, tiered) has: a
// backend that owns the wrapped one, lists through it and opens a file through it, and a
// file that keeps the inner file with its size and alignment. A decorator adds only what it
// does: its file's read(), and how `wrap` makes that file. (The inner backend itself is
// made by inner_backend.hpp.)
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/status.hpp>
#include <k3/storage.hpp>

namespace k3::storage::local {

/// A file read through a decorator: the inner file, whose size and alignment it reports.
class DecoratorFile : public sdk::StorageFile {
 public:
  explicit DecoratorFile(std::unique_ptr<sdk::StorageFile> inner) : inner_(std::move(inner)) {}
  [[nodiscard]] std::uint64_t size() const noexcept override { return inner_->size(); }
  [[nodiscard]] std::uint32_t alignment() const noexcept override { return inner_->alignment(); }

 protected:
  [[nodiscard]] sdk::StorageFile& inner() const noexcept { return *inner_; }

 private:
  std::unique_ptr<sdk::StorageFile> inner_;
};

/// A decorator's backend over the inner backend. Listing passes straight through (it
/// costs no modelled bandwidth and injects no fault); a file is opened by the inner
/// backend, whose refusal is returned as it is, and handed to wrap().
class DecoratorBackend : public sdk::StorageBackend {
 public:
  explicit DecoratorBackend(std::unique_ptr<sdk::StorageBackend> inner) : inner_(std::move(inner)) {}

  sdk::Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    return inner_->list(uri, names);
  }

  sdk::Status open(std::string_view uri, std::unique_ptr<sdk::StorageFile>& out) noexcept override {
    std::unique_ptr<sdk::StorageFile> file;
    sdk::Status st = inner_->open(uri, file);
    if (!st.ok()) return st;
    try {
      return wrap(uri, std::move(file), out);
    } catch (const std::exception& e) {
      return sdk::Status::error(sdk::StatusCode::out_of_memory, std::string(uri) + ": " + e.what());
    }
  }

 protected:
  /// Makes `out`, the decorator's file over `inner` (the file `uri` opened by the inner
  /// backend; `out` may be `inner` itself where the decorator leaves a file alone). An
  /// exception (an allocation that failed) is reported as out_of_memory naming `uri`.
  virtual sdk::Status wrap(std::string_view uri, std::unique_ptr<sdk::StorageFile> inner,
                           std::unique_ptr<sdk::StorageFile>& out) = 0;

 private:
  std::unique_ptr<sdk::StorageBackend> inner_;
};

}  // namespace k3::storage::local
