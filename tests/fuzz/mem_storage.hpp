// An in-memory storage backend for the harnesses: the checkpoint parsers read every byte
// through a sdk::StorageBackend (core never opens checkpoint files itself), so a harness
// hands them the fuzz input as files without touching the disk. It keeps the storage
// contract (sdk/k3/storage.hpp): a read past the end is short_read, a missing file
// not_found, list() unsupported when asked to behave like http.
#pragma once
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <k3/storage.hpp>

namespace k3::fuzz {

class MemFile final : public sdk::StorageFile {
 public:
  explicit MemFile(std::string bytes) : bytes_(std::move(bytes)) {}
  [[nodiscard]] std::uint64_t size() const noexcept override { return bytes_.size(); }
  [[nodiscard]] std::uint32_t alignment() const noexcept override { return 1; }
  sdk::Status read(std::span<sdk::ReadRequest> batch) noexcept override {
    sdk::Status first;
    for (auto& r : batch) {
      if (r.offset > bytes_.size() || r.length > bytes_.size() - r.offset) {
        r.result = sdk::StatusCode::short_read;
        if (first.ok())
          first = sdk::Status::error(sdk::StatusCode::short_read, "short read at offset " + std::to_string(r.offset) +
                                                                      " of " + std::to_string(r.length) +
                                                                      " bytes (file has " +
                                                                      std::to_string(bytes_.size()) + ")");
        continue;
      }
      if (r.length != 0) std::memcpy(r.dest, bytes_.data() + r.offset, r.length);
      r.result = sdk::StatusCode::ok;
    }
    return first;
  }

 private:
  std::string bytes_;
};

/// A file of `size` zero bytes that holds no memory (a large trunk.bin).
class ZeroFile final : public sdk::StorageFile {
 public:
  explicit ZeroFile(std::uint64_t size) : size_(size) {}
  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
  [[nodiscard]] std::uint32_t alignment() const noexcept override { return 1; }
  sdk::Status read(std::span<sdk::ReadRequest> batch) noexcept override {
    sdk::Status first;
    for (auto& r : batch) {
      if (r.offset > size_ || r.length > size_ - r.offset) {
        r.result = sdk::StatusCode::short_read;
        if (first.ok()) first = sdk::Status::error(sdk::StatusCode::short_read, "short read past the end");
        continue;
      }
      if (r.length != 0) std::memset(r.dest, 0, r.length);
      r.result = sdk::StatusCode::ok;
    }
    return first;
  }

 private:
  std::uint64_t size_;
};

class MemStorage final : public sdk::StorageBackend {
 public:
  /// `can_list` false: list() answers unsupported, as the http backend does.
  explicit MemStorage(bool can_list = true) : can_list_(can_list) {}
  void put(const std::string& uri, std::string bytes) { files_[uri] = std::move(bytes); }
  /// `uri` reads as `size` zero bytes.
  void put_zeros(const std::string& uri, std::uint64_t size) { zeros_[uri] = size; }

  sdk::Status open(std::string_view uri, std::unique_ptr<sdk::StorageFile>& out) noexcept override {
    if (const auto z = zeros_.find(std::string(uri)); z != zeros_.end()) {
      out = std::make_unique<ZeroFile>(z->second);
      return {};
    }
    const auto it = files_.find(std::string(uri));
    if (it == files_.end()) return sdk::Status::error(sdk::StatusCode::not_found, std::string(uri) + ": no such file");
    out = std::make_unique<MemFile>(it->second);
    return {};
  }
  sdk::Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    if (!can_list_) return sdk::Status::error(sdk::StatusCode::unsupported, "this backend cannot list");
    names.clear();
    const std::string prefix = std::string(uri) + "/";
    for (const auto& [name, bytes] : files_)
      if (name.starts_with(prefix) && name.find('/', prefix.size()) == std::string::npos)
        names.push_back(name.substr(prefix.size()));
    for (const auto& [name, bytes] : zeros_)
      if (name.starts_with(prefix) && name.find('/', prefix.size()) == std::string::npos)
        names.push_back(name.substr(prefix.size()));
    return {};
  }

 private:
  bool can_list_;
  std::map<std::string, std::string> files_;
  std::map<std::string, std::uint64_t> zeros_;
};

}  // namespace k3::fuzz
