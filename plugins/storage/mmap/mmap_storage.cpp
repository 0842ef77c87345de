// Storage `mmap`: maps each file read-only once at open; read() copies from the mapping
// into the host's destination, so the contract (host-owned buffers, short_read past the
// end) is the same as for the other backends. Reads past the size seen at open are refused
// as short_read before touching the mapping, so they cannot raise SIGBUS. A file truncated
// by someone else after open still can (see README).
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <k3/plugin.hpp>

#include "common/batch_outcome.hpp"
#include "common/local_file.hpp"

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;
namespace local = k3::storage::local;

/// A read-only shared mapping of a whole file (none for an empty file).
class Mapping {
 public:
  Mapping(void* base, std::size_t length) noexcept : base_(base), length_(length) {}
  ~Mapping() {
    if (base_ != nullptr) ::munmap(base_, length_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  [[nodiscard]] const std::byte* data() const noexcept { return static_cast<const std::byte*>(base_); }

 private:
  void* base_;
  std::size_t length_;
};

class MmapFile final : public k3::sdk::StorageFile {
 public:
  MmapFile(std::string path, std::unique_ptr<Mapping> map, std::uint64_t size)
      : path_(std::move(path)), map_(std::move(map)), size_(size) {}

  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
  [[nodiscard]] std::uint32_t alignment() const noexcept override { return 1; }

  Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    try {
      return local::read_each(batch, [&](const k3::sdk::ReadRequest& r) { return read_one(r); });
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, path_ + ": " + e.what());
    }
  }

 private:
  Status read_one(const k3::sdk::ReadRequest& request) const {
    if (request.length == 0) return Status::success();
    if (request.dest == nullptr) return local::no_destination(path_, request.offset);
    if (Status st = local::check_inside(path_, size_, request.offset, request.length); !st.ok()) return st;
    std::memcpy(request.dest, map_->data() + request.offset, static_cast<std::size_t>(request.length));
    return Status::success();
  }

  std::string path_;
  std::unique_ptr<Mapping> map_;
  std::uint64_t size_;
};

class MmapBackend final : public k3::sdk::StorageBackend {
 public:
  MmapBackend(k3::sdk::HostServices* host, int advice, std::string advice_name)
      : host_(host), advice_(advice), advice_name_(std::move(advice_name)) {}

  Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    return k3::storage::local::list_local(uri, names);
  }

  Status open(std::string_view uri, std::unique_ptr<k3::sdk::StorageFile>& out) noexcept override {
    try {
      const std::string path(uri);
      local::UniqueFd fd;
      std::uint64_t size = 0;
      int open_errno = 0;
      if (Status st = local::open_local(path, 0, fd, size, open_errno); !st.ok()) return st;
      void* base = nullptr;
      if (size > 0) {
        base = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd.get(), 0);
        if (base == MAP_FAILED)
          return Status::error(StatusCode::io_error, path + ": cannot map: " + local::errno_text(errno));
        // A hint only: a kernel that ignores it changes speed, never bytes.
        if (::madvise(base, static_cast<std::size_t>(size), advice_) != 0 && host_ != nullptr)
          host_->log(k3::sdk::LogLevel::warn, "storage/mmap",
                     path + ": madvise(" + advice_name_ + ") refused: " + local::errno_text(errno));
      }
      auto map = std::make_unique<Mapping>(base, static_cast<std::size_t>(size));
      if (host_ != nullptr)
        host_->log(k3::sdk::LogLevel::debug, "storage/mmap",
                   "mapped " + path + " (" + std::to_string(size) + " bytes)");
      out = std::make_unique<MmapFile>(path, std::move(map), size);  // the mapping outlives the descriptor
      return Status::success();
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, std::string(uri) + ": " + e.what());
    }
  }

 private:
  k3::sdk::HostServices* host_;
  int advice_;
  std::string advice_name_;
};

}  // namespace

namespace k3::storage::mmap {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    sdk::param::choice("advice", "normal", "normal|random|sequential|willneed",
                       "madvise hint for the whole mapping; a refused hint is logged and ignored (speed, never bytes)"),
};

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::StorageBackend>& out,
                   std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  const std::string advice = params.get_string("advice");
  unknown_params = params.unused();
  int flag = MADV_NORMAL;  // "normal"; the reader refused anything but the four choices
  if (advice == "random")
    flag = MADV_RANDOM;
  else if (advice == "sequential")
    flag = MADV_SEQUENTIAL;
  else if (advice == "willneed")
    flag = MADV_WILLNEED;
  out = std::make_unique<MmapBackend>(args.host, flag, advice);
  return sdk::Status::success();
}

}  // namespace k3::storage::mmap

K3_PLUGIN(storage, "mmap", "1.0.0", k3::storage::mmap::create, nullptr)
K3_PLUGIN_PARAMS(k3::storage::mmap::kParams)
