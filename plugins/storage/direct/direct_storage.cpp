// Storage `direct`: reads local files with O_DIRECT, bypassing the page cache, so a model
// larger than RAM streams at disk speed without evicting everything else (and a benchmark
// measures the disk, not memory). O_DIRECT needs aligned offsets, lengths and buffers:
// aligned requests are read straight into the destination, the rest through aligned bounce
// windows. A batch is split over a pool of reader threads.
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <k3/plugin.hpp>

#include "common/aligned_file.hpp"
#include "common/batch_outcome.hpp"
#include "common/local_file.hpp"
#include "common/reader_pool.hpp"
#include "common/segments.hpp"

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;
namespace local = k3::storage::local;

constexpr std::uint64_t kBufferedChunk = std::uint64_t{1} << 30;  // without O_DIRECT: at most 1 GiB per pread

struct Options {
  unsigned threads = 2;
  bool fallback_buffered = false;
};

class DirectFile final : public local::AlignedFile {
 public:
  DirectFile(std::string path, local::AlignedOpen opened, std::shared_ptr<local::ReaderPool> pool)
      : AlignedFile(std::move(path), std::move(opened)), pool_(std::move(pool)) {}

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
    std::vector<local::Segment> segments;
    if (Status st = plan(0, request, kBufferedChunk, segments); !st.ok()) return st;
    local::AlignedBuffer bounce;
    for (const auto& seg : segments) {
      std::byte* target = seg.dest;
      if (seg.bounce) {
        if (!bounce) bounce = bounce_buffer();
        target = bounce.get();
      }
      std::uint64_t got = 0;
      if (Status st = read_window(seg, target, got); !st.ok()) return st;
      if (got < seg.needed())  // the file ended early: truncated after open
        return local::short_read(path_, request.offset, got_before_end(seg, request, got), request.length);
      if (seg.bounce) copy_out(seg, target);
    }
    return Status::success();
  }

  /// Reads the window until it holds seg.needed() bytes or the file ends; `got` = bytes read.
  Status read_window(const local::Segment& seg, std::byte* target, std::uint64_t& got) const {
    got = 0;
    while (got < seg.needed()) {
      const std::uint64_t position = seg.file_offset + got;
      const ssize_t n =
          ::pread(fd_.get(), target + got, static_cast<std::size_t>(seg.length - got), static_cast<off_t>(position));
      if (n < 0) {
        const int err = errno;
        if (err == EINTR) continue;
        return read_error(position, err);
      }
      got += static_cast<std::uint64_t>(n);
      if (at_end(static_cast<std::uint64_t>(n), got)) break;
    }
    return Status::success();
  }

  std::shared_ptr<local::ReaderPool> pool_;
};

class DirectBackend final : public local::AlignedBackend {
 public:
  DirectBackend(k3::sdk::HostServices* host, Options options)
      : AlignedBackend(host, "storage/direct", true, options.fallback_buffered,
                       "use another backend or set fallback=buffered"),
        pool_(std::make_shared<local::ReaderPool>(options.threads)) {}

 private:
  std::unique_ptr<k3::sdk::StorageFile> make_file(std::string path, local::AlignedOpen opened) override {
    return std::make_unique<DirectFile>(std::move(path), std::move(opened), pool_);
  }

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
