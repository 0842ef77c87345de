// Storage `direct`: reads local files with O_DIRECT, bypassing the page cache, so a model
// larger than RAM streams at disk speed without evicting everything else (and a benchmark
// measures the disk, not memory). O_DIRECT needs aligned offsets, lengths and buffers:
// aligned requests are read straight into the destination, the rest through aligned bounce
// windows. A batch is split over a pool of reader threads.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
#include "common/reader_pool.hpp"
#include "common/segments.hpp"

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;
namespace local = k3::storage::local;

constexpr std::uint64_t kAlignment = 4096;
constexpr std::uint64_t kBounceWindow = std::uint64_t{1} << 20;  // 1 MiB per bounce buffer
constexpr std::uint64_t kDirectChunk = std::uint64_t{1} << 30;   // at most 1 GiB per pread

struct Options {
  unsigned threads = 2;
  bool fallback_buffered = false;
};

class DirectFile final : public k3::sdk::StorageFile {
 public:
  DirectFile(std::string path, local::UniqueFd fd, std::uint64_t size, bool direct,
             std::shared_ptr<local::ReaderPool> pool)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size), direct_(direct), pool_(std::move(pool)) {}

  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
  [[nodiscard]] std::uint32_t alignment() const noexcept override {
    return direct_ ? static_cast<std::uint32_t>(kAlignment) : 1;
  }

  Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    try {
      std::vector<Status> results(batch.size());
      pool_->run(batch.size(), [&](std::size_t i) {
        try {
          results[i] = read_one(batch[i]);
        } catch (const std::exception& e) {  // std::bad_alloc for a bounce buffer
          results[i] = Status::error(StatusCode::out_of_memory, path_ + ": " + e.what());
        }
      });
      return local::settle(batch, results);
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, path_ + ": " + e.what());
    }
  }

 private:
  Status read_one(const k3::sdk::ReadRequest& request) const {
    if (request.length == 0) return Status::success();
    if (request.dest == nullptr) return local::no_destination(path_, request.offset);
    if (Status st = local::check_inside(path_, size_, request.offset, request.length); !st.ok()) return st;
    std::vector<local::Segment> segments;
    local::plan_segments(0, request.offset, request.length, request.dest, direct_ ? kAlignment : 1,
                         direct_ ? kBounceWindow : kDirectChunk, segments);
    local::AlignedBuffer bounce;
    for (const auto& seg : segments) {
      std::byte* target = seg.dest;
      if (seg.bounce) {
        if (!bounce) bounce = local::aligned_buffer(kBounceWindow, kAlignment);
        target = bounce.get();
      }
      std::uint64_t got = 0;
      if (Status st = read_window(seg, target, got); !st.ok()) return st;
      if (got < seg.needed()) {  // the file ended early: truncated after open
        const std::uint64_t before = seg.bounce ? seg.file_offset + seg.copy_from : seg.file_offset;
        const std::uint64_t reached = seg.file_offset + got;
        return local::short_read(path_, request.offset,
                                 (reached > before ? reached : before) - request.offset, request.length);
      }
      if (seg.bounce) std::memcpy(seg.dest, target + seg.copy_from, seg.copy_length);
    }
    return Status::success();
  }

  /// Reads the window until it holds seg.needed() bytes or the file ends; `got` = bytes read.
  Status read_window(const local::Segment& seg, std::byte* target, std::uint64_t& got) const {
    got = 0;
    while (got < seg.needed()) {
      const std::uint64_t position = seg.file_offset + got;
      const ssize_t n = ::pread(fd_.get(), target + got, static_cast<std::size_t>(seg.length - got),
                                static_cast<off_t>(position));
      if (n < 0) {
        const int err = errno;
        if (err == EINTR) continue;
        return Status::error(StatusCode::io_error,
                             path_ + ": read error at offset " + std::to_string(position) + ": " + local::errno_text(err));
      }
      if (n == 0) break;
      got += static_cast<std::uint64_t>(n);
      // O_DIRECT returns a partial, unaligned count only at the end of the file.
      if (direct_ && got % kAlignment != 0) break;
    }
    return Status::success();
  }

  std::string path_;
  local::UniqueFd fd_;
  std::uint64_t size_;
  bool direct_;
  std::shared_ptr<local::ReaderPool> pool_;
};

class DirectBackend final : public k3::sdk::StorageBackend {
 public:
  DirectBackend(k3::sdk::HostServices* host, Options options)
      : host_(host), options_(options), pool_(std::make_shared<local::ReaderPool>(options.threads)) {}

  Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    return k3::storage::local::list_local(uri, names);
  }

  Status open(std::string_view uri, std::unique_ptr<k3::sdk::StorageFile>& out) noexcept override {
    try {
      const std::string path(uri);
      local::UniqueFd fd;
      std::uint64_t size = 0;
      int open_errno = 0;
      Status st = local::open_local(path, O_DIRECT, fd, size, open_errno);
      bool direct = true;
      if (!st.ok() && open_errno == EINVAL) {
        if (!options_.fallback_buffered)
          return Status::error(StatusCode::unsupported,
                               path + ": the filesystem refuses O_DIRECT (EINVAL at open); use another backend or "
                                      "set fallback=buffered");
        if (host_ != nullptr)
          host_->log(k3::sdk::LogLevel::warn, "storage/direct",
                     path + ": the filesystem refuses O_DIRECT; reading through the page cache (fallback=buffered)");
        st = local::open_local(path, 0, fd, size, open_errno);
        direct = false;
      }
      if (!st.ok()) return st;
      if (host_ != nullptr)
        host_->log(k3::sdk::LogLevel::debug, "storage/direct",
                   "opened " + path + " (" + std::to_string(size) + " bytes, " + (direct ? "O_DIRECT" : "buffered") + ")");
      out = std::make_unique<DirectFile>(path, std::move(fd), size, direct, pool_);
      return Status::success();
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, std::string(uri) + ": " + e.what());
    }
  }

 private:
  k3::sdk::HostServices* host_;
  Options options_;
  std::shared_ptr<local::ReaderPool> pool_;  // shared with open files, which may outlive the backend
};

}  // namespace

namespace k3::storage::direct {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    sdk::param::integer("threads", "2", "[1, 64]",
                        "readers per batch, the calling thread included; 1 reads the batch in order on the caller"),
    sdk::param::choice("fallback", "none", "none|buffered",
                       "when the filesystem refuses O_DIRECT: none fails, buffered reads through the page cache "
                       "with a warning"),
};

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::StorageBackend>& out,
                   std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  Options options;
  const int threads = params.get_int<int>("threads");
  const std::string fallback = params.get_string("fallback");
  unknown_params = params.unused();
  options.threads = static_cast<unsigned>(threads);
  options.fallback_buffered = fallback == "buffered";
  out = std::make_unique<DirectBackend>(args.host, options);
  return sdk::Status::success();
}

}  // namespace k3::storage::direct

K3_PLUGIN(storage, "direct", "1.0.0", k3::storage::direct::create, nullptr)
K3_PLUGIN_PARAMS(k3::storage::direct::kParams)
