// Storage `tiered`: a local directory kept as a cache of fixed-size blocks in front of an
// inner backend (http in practice; any backend works).
//
// A read is cut into blocks of `block_bytes` (the file's block b is [b·B, min((b+1)·B, size))).
// Blocks present in the tier are read from it; the missing ones go to the inner backend in
// one batch (whole blocks, so the http backend fetches them in parallel and merges adjacent
// ones), are copied to the request, and are handed to a writer thread that stores them in
// the tier (tier_block.hpp: temporary name, checksum, rename) and evicts the least recently
// used blocks beyond `max_mb`. Every serve checks what it copies first (the block's header
// and the 64 KiB pages the read lies in, each against its checksum): a block whose file is
// missing, torn, changed on disk or of another file is a miss (dropped, fetched again from
// the inner backend and counted), never served.
// A file's blocks are keyed by its URI, size and version (the inner file's validator, e.g.
// the http ETag, through sdk::StorageFileVersion; without one, a hash of a few bytes
// sampled from the inner backend at open), so blocks of one revision are never served for
// another. Requests reaching past the end of the file, and a tier that cannot be written,
// change nothing: the inner backend answers them. Output bytes are the inner backend's
// bytes whichever way they come. The counters reach the run report (sdk::StorageCounters).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <k3/plugin.hpp>
#include <k3/storage_extras.hpp>

#include "common/inner_backend.hpp"
#include "common/local_file.hpp"
#include "tier_block.hpp"

namespace local = k3::storage::local;
namespace tier = k3::storage::tiered;
namespace fs = std::filesystem;

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;

constexpr std::string_view kComponent = "storage/tiered";

struct Settings {
  std::string dir;              ///< the tier's directory (created)
  std::uint64_t max_bytes = 0;  ///< cap on stored block bytes; 0 = none
  std::uint64_t block_bytes = std::uint64_t{1} << 20;
  std::uint64_t max_pending_bytes = std::uint64_t{256} << 20;  ///< queued for writing; beyond: not cached
  bool fsync = false;                                          ///< fsync each block before its rename
};

/// Part of a read inside one block: where in the block, how much, and where it goes.
struct Part {
  std::uint64_t offset;  ///< in the block
  std::uint64_t length;
  std::byte* dest;
};

/// A block's name inside the tier: "<file key>/<block index>.blk".
std::string block_name(const std::string& key, std::uint64_t index) {
  return key + "/" + std::to_string(index) + ".blk";
}

/// The tier: its index (the blocks present, in least-recently-used order), the writer
/// thread, and the counters. Shared by the backend and its files. Thread-safe.
class Tier {
 public:
  Tier(Settings s, k3::sdk::HostServices* host) : s_(std::move(s)), host_(host) {}

  /// Creates the directory, rebuilds the index from it (oldest first), removes temporary
  /// files of writers that are gone, starts the writer.
  Status start() {
    std::error_code ec;
    fs::create_directories(s_.dir, ec);
    if (ec) return Status::error(StatusCode::io_error, s_.dir + ": cannot create the tier directory: " + ec.message());
    std::multimap<fs::file_time_type, std::pair<std::string, std::uint64_t>> by_age;
    for (const auto& sub : fs::directory_iterator(s_.dir, ec)) {
      if (!sub.is_directory()) continue;
      for (const auto& e : fs::directory_iterator(sub.path(), ec)) {
        const std::string name = e.path().filename().string();
        if (name.starts_with(".") && name.find(".tmp.") != std::string::npos) {
          remove_if_dead(e.path(), name);
          continue;
        }
        if (!name.ends_with(".blk") || !e.is_regular_file()) continue;
        const std::uint64_t bytes = e.file_size(ec);
        if (ec) continue;
        by_age.emplace(e.last_write_time(ec), std::pair{sub.path().filename().string() + "/" + name, bytes});
      }
    }
    if (ec) return Status::error(StatusCode::io_error, s_.dir + ": cannot list the tier directory: " + ec.message());
    for (auto& [age, entry] : by_age) insert_locked(entry.first, entry.second);
    evict_locked(0);
    writer_ = std::thread([this] { write_loop(); });
    return Status::success();
  }

  ~Tier() {
    if (writer_.joinable()) {
      {
        const std::lock_guard lock(queue_mutex_);
        stopping_ = true;
      }
      queue_wake_.notify_all();
      writer_.join();  // the queue is drained first: blocks fetched are kept
    }
    if (host_ != nullptr && (hit_bytes_ > 0 || miss_bytes_ > 0))
      host_->log(k3::sdk::LogLevel::info, kComponent,
                 std::to_string(hit_bytes_.load()) + " bytes from the tier, " + std::to_string(miss_bytes_.load()) +
                     " from the inner backend; " + std::to_string(written_.load()) + " blocks written, " +
                     std::to_string(evicted_.load()) + " evicted, " + std::to_string(dropped_.load()) +
                     " not cached (writer busy or failing), " + std::to_string(bad_.load()) +
                     " torn or damaged blocks dropped and fetched again; " + std::to_string(total_bytes()) +
                     " bytes in " + s_.dir);
  }

  /// The counters, in a fixed order (sdk::StorageCounters).
  void counters(std::vector<std::pair<std::string, std::uint64_t>>& out) {
    out.emplace_back("tier_hit_bytes", hit_bytes_.load());
    out.emplace_back("tier_miss_bytes", miss_bytes_.load());
    out.emplace_back("tier_blocks_written", written_.load());
    out.emplace_back("tier_blocks_evicted", evicted_.load());
    out.emplace_back("tier_blocks_not_cached", dropped_.load());
    out.emplace_back("tier_blocks_damaged_refetched", bad_.load());
    out.emplace_back("tier_files_keyed_by_sample", sampled_.load());
    out.emplace_back("tier_block_bytes_read", block_bytes_read_.load());  // headers and whole pages, to check them
    out.emplace_back("tier_check_ns", check_ns_.load());
  }
  /// A file opened without a validator, keyed by sampled bytes.
  void count_sampled() noexcept { ++sampled_; }
  Tier(const Tier&) = delete;
  Tier& operator=(const Tier&) = delete;

  const Settings& settings() const noexcept { return s_; }

  /// Copies `parts` of block `index` of the file (`key`, `file_size`, `version`) to their
  /// destinations; false on a miss (absent, evicted meanwhile, or damaged: dropped). Every
  /// serve reads the block's header and the pages the parts lie in (once for all the parts a
  /// batch wants of it) and checks them before a byte is copied: a block changed on disk
  /// after an earlier serve is caught as surely as one torn before this process started.
  bool read(const std::string& key, std::uint64_t file_size, std::uint64_t version, std::uint64_t index,
            std::span<const Part> parts) {
    const std::string name = block_name(key, index);
    {
      const std::lock_guard lock(index_mutex_);
      auto it = entries_.find(name);
      if (it == entries_.end()) return false;
      lru_.splice(lru_.end(), lru_, it->second.lru);  // most recently used
    }
    const std::string path = s_.dir + "/" + name;
    local::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return forget(name, false);
    const std::uint64_t block_length = std::min(s_.block_bytes, file_size - index * s_.block_bytes);
    // The header and the pages the parts lie in, into this thread's scratch (kept: a serve
    // neither allocates nor clears a block's worth of memory); each page checked.
    const std::uint64_t head = tier::header_bytes(block_length), P = tier::kPageBytes;
    std::uint64_t lo = block_length, hi = 0;
    for (const Part& p : parts) {
      lo = std::min(lo, p.offset);
      hi = std::max(hi, p.offset + p.length);
    }
    const std::uint64_t first_page = lo / P, end_page = (hi + P - 1) / P;
    const std::uint64_t from = first_page * P, to = std::min(end_page * P, block_length);
    thread_local std::vector<std::byte> scratch;
    if (scratch.size() < head + (to - from)) scratch.resize(static_cast<std::size_t>(head + (to - from)));
    if (!read_exact(fd.get(), scratch.data(), head, 0) ||
        !read_exact(fd.get(), scratch.data() + head, to - from, head + from) || !at_eof(fd.get(), head + block_length))
      return forget(name, true);
    block_bytes_read_ += head + (to - from);
    const auto t0 = std::chrono::steady_clock::now();
    const auto h = tier::decode({scratch.data(), static_cast<std::size_t>(head)}, block_length);
    bool intact = h && h->file_size == file_size && h->index == index && h->version == version;
    for (std::uint64_t page = first_page; intact && page < end_page; ++page) {
      const std::uint64_t at = page * P, len = std::min(P, block_length - at);
      intact = tier::hash(scratch.data() + head + (at - from), len) == h->pages[static_cast<std::size_t>(page)];
    }
    check_ns_ += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    if (!intact) return forget(name, true);
    for (const Part& p : parts) {
      std::memcpy(p.dest, scratch.data() + head + (p.offset - from), p.length);
      hit_bytes_ += p.length;
    }
    return true;
  }

  /// Queues a fetched block for writing; dropped when the queue is full (a cache may
  /// forget; the bytes were already delivered).
  void store(const std::string& key, std::uint64_t file_size, std::uint64_t version, std::uint64_t index,
             std::vector<std::byte> data) {
    miss_bytes_ += data.size();
    if (s_.max_bytes != 0 && data.size() + tier::header_bytes(data.size()) > s_.max_bytes) {
      ++dropped_;
      return;
    }
    {
      const std::lock_guard lock(queue_mutex_);
      if (pending_bytes_ + data.size() > s_.max_pending_bytes) {
        ++dropped_;
        return;
      }
      pending_bytes_ += data.size();
      queue_.push_back({key, file_size, version, index, std::move(data)});
    }
    queue_wake_.notify_one();
  }

  /// Whether the block is in the index (for the warm progress; no read).
  bool has(const std::string& key, std::uint64_t index) {
    const std::lock_guard lock(index_mutex_);
    return entries_.contains(block_name(key, index));
  }

 private:
  struct Entry {
    std::uint64_t bytes = 0;  ///< on disk, header included
    std::list<std::string>::iterator lru;
  };
  struct Job {
    std::string key;
    std::uint64_t file_size, version, index;
    std::vector<std::byte> data;
  };

  static bool read_exact(int fd, std::byte* dest, std::uint64_t length, std::uint64_t offset) {
    std::uint64_t done = 0;
    while (done < length) {
      const ssize_t got = ::pread(fd, dest + done, length - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      done += static_cast<std::uint64_t>(got);
    }
    return true;
  }
  static bool at_eof(int fd, std::uint64_t size) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) == size;
  }

  /// A temporary file ".<name>.tmp.<pid>.<n>" whose writer process is gone is removed.
  static void remove_if_dead(const fs::path& path, const std::string& name) {
    const auto at = name.find(".tmp.");
    const long pid = std::strtol(name.c_str() + at + 5, nullptr, 10);
    if (pid > 0 && pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) == 0) return;  // alive: not ours to touch
    std::error_code ec;
    fs::remove(path, ec);
  }

  /// Drops a block from the index (and, when damaged, from the disk, counted); returns false
  /// (a miss: the caller fetches it again from the inner backend).
  bool forget(const std::string& name, bool torn) {
    {
      const std::lock_guard lock(index_mutex_);
      auto it = entries_.find(name);
      if (it != entries_.end()) {
        total_ -= it->second.bytes;
        lru_.erase(it->second.lru);
        entries_.erase(it);
      }
    }
    if (torn) {
      ++bad_;
      std::error_code ec;
      fs::remove(s_.dir + "/" + name, ec);
      if (host_ != nullptr)
        host_->log(k3::sdk::LogLevel::debug, kComponent, "dropped damaged block " + name + "; fetching it again");
    }
    return false;
  }

  void insert_locked(const std::string& name, std::uint64_t bytes) {
    auto it = entries_.find(name);
    if (it != entries_.end()) {
      total_ -= it->second.bytes;
      lru_.erase(it->second.lru);
      entries_.erase(it);
    }
    lru_.push_back(name);
    entries_.emplace(name, Entry{bytes, std::prev(lru_.end())});
    total_ += bytes;
  }

  /// Evicts least recently used blocks until `incoming` more bytes fit under the cap.
  void evict_locked(std::uint64_t incoming) {
    if (s_.max_bytes == 0) return;
    while (!lru_.empty() && total_ + incoming > s_.max_bytes) {
      const std::string victim = lru_.front();
      auto it = entries_.find(victim);
      total_ -= it->second.bytes;
      entries_.erase(it);
      lru_.pop_front();
      std::error_code ec;
      fs::remove(s_.dir + "/" + victim, ec);
      ++evicted_;
    }
  }

  std::uint64_t total_bytes() {
    const std::lock_guard lock(index_mutex_);
    return total_;
  }

  /// Writes one block: temporary name, optional fsync, rename; then indexes it.
  bool write_block(const Job& job) {
    const std::string key_dir = s_.dir + "/" + job.key;
    std::error_code ec;
    fs::create_directories(key_dir, ec);
    if (ec) return false;
    const std::string final_name = std::to_string(job.index) + ".blk";
    const std::string tmp = key_dir + "/." + final_name + ".tmp." + std::to_string(::getpid()) + "." +
                            std::to_string(++tmp_counter_);
    const std::vector<std::byte> header = tier::encode(job.file_size, job.index, job.version, job.data);
    {
      local::UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (fd.get() < 0) return false;
      auto write_all = [&](const std::byte* p, std::size_t n) {
        while (n > 0) {
          const ssize_t w = ::write(fd.get(), p, n);
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) return false;
          p += w;
          n -= static_cast<std::size_t>(w);
        }
        return true;
      };
      if (!write_all(header.data(), header.size()) || !write_all(job.data.data(), job.data.size()) ||
          (s_.fsync && ::fsync(fd.get()) != 0)) {
        fs::remove(tmp, ec);
        return false;
      }
    }
    const std::uint64_t bytes = header.size() + job.data.size();
    const std::lock_guard lock(index_mutex_);  // rename and index together: eviction sees both
    evict_locked(bytes);
    if (::rename(tmp.c_str(), (key_dir + "/" + final_name).c_str()) != 0) {
      fs::remove(tmp, ec);
      return false;
    }
    insert_locked(job.key + "/" + final_name, bytes);
    return true;
  }

  void write_loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(queue_mutex_);
        queue_wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything written
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      bool ok = false;
      try {
        ok = write_block(job);
      } catch (...) {
      }
      if (ok) {
        ++written_;
      } else {
        ++dropped_;
        if (!warned_.exchange(true) && host_ != nullptr)
          host_->log(
              k3::sdk::LogLevel::warn, kComponent,
              s_.dir +
                  ": cannot write a block to the tier (full or read-only?); reads still come from the inner backend");
      }
      const std::lock_guard lock(queue_mutex_);
      pending_bytes_ -= job.data.size();
    }
  }

  Settings s_;
  k3::sdk::HostServices* host_;

  std::mutex index_mutex_;
  std::unordered_map<std::string, Entry> entries_;  ///< guarded by index_mutex_
  std::list<std::string> lru_;                      ///< front = least recently used; guarded
  std::uint64_t total_ = 0;                         ///< bytes on disk; guarded

  std::mutex queue_mutex_;
  std::condition_variable queue_wake_;
  std::deque<Job> queue_;            ///< guarded by queue_mutex_
  std::uint64_t pending_bytes_ = 0;  ///< guarded by queue_mutex_
  bool stopping_ = false;            ///< guarded by queue_mutex_
  std::thread writer_;
  std::uint64_t tmp_counter_ = 0;  ///< writer thread only

  std::atomic<std::uint64_t> hit_bytes_{0}, miss_bytes_{0}, written_{0}, evicted_{0}, dropped_{0}, bad_{0}, sampled_{0};
  std::atomic<std::uint64_t> block_bytes_read_{0}, check_ns_{0};
  std::atomic<bool> warned_{false};
};

class TieredFile final : public k3::sdk::StorageFile {
 public:
  TieredFile(std::unique_ptr<k3::sdk::StorageFile> inner, std::shared_ptr<Tier> tier, std::string key,
             std::uint64_t version)
      : inner_(std::move(inner)),
        tier_(std::move(tier)),
        key_(std::move(key)),
        size_(inner_->size()),
        version_(version) {}

  [[nodiscard]] std::uint64_t size() const noexcept override { return size_; }
  [[nodiscard]] std::uint32_t alignment() const noexcept override { return 1; }

  Status read(std::span<k3::sdk::ReadRequest> batch) noexcept override {
    try {
      return read_batch(batch);
    } catch (const std::exception& e) {
      for (auto& r : batch) r.result = StatusCode::out_of_memory;
      return Status::error(StatusCode::out_of_memory, std::string("tiered: ") + e.what());
    }
  }

 private:
  Status read_batch(std::span<k3::sdk::ReadRequest> batch) {
    const std::uint64_t B = tier_->settings().block_bytes;
    std::vector<k3::sdk::ReadRequest> inner;
    std::vector<std::size_t> passthrough;  ///< requests the tier cannot serve (past the end, no destination)
    std::map<std::uint64_t, std::vector<Part>> wanted;   ///< block index -> parts of the batch in it
    std::map<std::uint64_t, std::vector<Part>> missing;  ///< of those, the blocks the tier does not serve
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto& r = batch[i];
      r.result = StatusCode::ok;
      if (r.length == 0) continue;
      if (r.dest == nullptr || r.offset > size_ ||
          r.length > size_ - r.offset) {  // the inner backend says what is wrong
        passthrough.push_back(i);
        inner.push_back(r);
        continue;
      }
      for (std::uint64_t at = r.offset; at < r.offset + r.length;) {
        const std::uint64_t b = at / B, in_block = at - b * B;
        const std::uint64_t n = std::min(B - in_block, r.offset + r.length - at);
        wanted[b].push_back({in_block, n, r.dest + (at - r.offset)});
        at += n;
      }
    }
    for (auto& [b, parts] : wanted)  // each block read and checked once for the whole batch
      if (!tier_->read(key_, size_, version_, b, parts)) missing.emplace(b, std::move(parts));
    if (inner.empty() && missing.empty()) return Status::success();
    std::vector<std::vector<std::byte>> blocks;
    blocks.reserve(missing.size());
    for (const auto& [b, wants] : missing) {
      const std::uint64_t length = std::min(B, size_ - b * B);
      blocks.emplace_back(length);
      inner.push_back({b * B, length, blocks.back().data(), StatusCode::ok});
    }
    Status st = inner_->read(inner);
    if (!st.ok()) {
      // A failure is the inner backend's to describe, request by request (a short read
      // names the request's offset, not a block's): the batch goes to it as it came.
      return inner_->read(batch);
    }
    std::size_t j = passthrough.size();
    for (auto& [b, wants] : missing) {
      auto& data = blocks[j - passthrough.size()];  // every block was read: the batch succeeded
      for (const Part& w : wants) std::memcpy(w.dest, data.data() + w.offset, w.length);
      tier_->store(key_, size_, version_, b, std::move(data));
      ++j;
    }
    return st;
  }

  std::unique_ptr<k3::sdk::StorageFile> inner_;
  std::shared_ptr<Tier> tier_;
  std::string key_;
  std::uint64_t size_;
  std::uint64_t version_;  ///< the file's version tag (tier_block.hpp)
};

class TieredBackend final : public k3::sdk::StorageBackend, public k3::sdk::StorageCounters {
 public:
  TieredBackend(std::unique_ptr<k3::sdk::StorageBackend> inner, std::shared_ptr<Tier> tier)
      : inner_(std::move(inner)), tier_(std::move(tier)) {}

  Status list(std::string_view uri, std::vector<std::string>& names) noexcept override {
    return inner_->list(uri, names);
  }

  Status open(std::string_view uri, std::unique_ptr<k3::sdk::StorageFile>& out) noexcept override {
    std::unique_ptr<k3::sdk::StorageFile> file;
    Status st = inner_->open(uri, file);
    if (!st.ok()) return st;
    try {
      std::uint64_t version = 0;
      if (Status v = version_of(uri, *file, version); !v.ok()) return v;
      const std::string key = tier::file_key(uri, file->size(), version);
      out = std::make_unique<TieredFile>(std::move(file), tier_, key, version);
    } catch (const std::exception& e) {
      return Status::error(StatusCode::out_of_memory, std::string(uri) + ": " + e.what());
    }
    return Status::success();
  }

  /// The tier's counters, then the inner backend's (when it has any) as "inner_<name>".
  Status counters(std::vector<std::pair<std::string, std::uint64_t>>& out) noexcept override {
    try {
      out.clear();
      tier_->counters(out);
      if (auto* inner = dynamic_cast<k3::sdk::StorageCounters*>(inner_.get())) {
        std::vector<std::pair<std::string, std::uint64_t>> more;
        if (Status st = inner->counters(more); !st.ok()) return st;
        for (auto& [name, value] : more) out.emplace_back("inner_" + name, value);
      }
      return Status::success();
    } catch (...) {
      return Status::error(StatusCode::out_of_memory, "tiered: out of memory");
    }
  }

 private:
  /// Which revision of the object `file` is: its validator when the inner backend reports
  /// one, else a hash of its first, middle and last kSample bytes read from the inner
  /// backend now (one batch), so a file replaced under the same size gets other blocks.
  Status version_of(std::string_view uri, k3::sdk::StorageFile& file, std::uint64_t& version) {
    if (const auto* v = dynamic_cast<const k3::sdk::StorageFileVersion*>(&file);
        v != nullptr && !v->version().empty()) {
      const std::string_view text = v->version();
      version = tier::version_tag('v', std::as_bytes(std::span(text.data(), text.size())));
      return Status::success();
    }
    constexpr std::uint64_t kSample = 4096;
    const std::uint64_t size = file.size(), n = std::min(size, kSample);
    std::vector<std::byte> bytes(static_cast<std::size_t>(3 * n));
    std::vector<k3::sdk::ReadRequest> batch;
    if (n > 0)
      for (const std::uint64_t at : {std::uint64_t{0}, (size - n) / 2, size - n})
        batch.push_back({at, n, bytes.data() + batch.size() * n, StatusCode::ok});
    if (!batch.empty())
      if (Status st = file.read(batch); !st.ok())
        return Status::error(st.code, std::string(uri) +
                                          ": reading the bytes that tell its revision apart "
                                          "(the inner backend gives no validator): " +
                                          st.detail);
    version = tier::version_tag('s', bytes);
    tier_->count_sampled();
    return Status::success();
  }

  std::unique_ptr<k3::sdk::StorageBackend> inner_;  // destroyed after the files that use it
  std::shared_ptr<Tier> tier_;
};

}  // namespace

namespace k3::storage::tiered {

constexpr k3::sdk::ParamDescriptor kParams[] = {
    sdk::param::required(
        sdk::param::path("dir", nullptr, "the local directory that holds the tier; created when missing")),
    local::inner_name("http"),
    local::kInnerKeys,
    sdk::param::integer("max_mb", "0", "[0, 1099511627776]",
                        "cap on the tier's size in MiB; least recently used blocks are evicted beyond it; 0 = no cap"),
    sdk::param::integer("block_kb", "1024", "[4, 1048576]",
                        "block size in KiB: the unit fetched, stored, checked and evicted"),
    sdk::param::integer("max_pending_mb", "256", "[1, 1048576]",
                        "MiB of fetched blocks waiting to be written; beyond it a block is delivered but not cached"),
    sdk::param::boolean("fsync", "false",
                        "fsync each block before its rename (survives power loss; costs write latency)"),
};

sdk::Status create(const sdk::CreateArgs& args, std::unique_ptr<sdk::StorageBackend>& out,
                   std::vector<std::string>& unknown_params) {
  sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  Settings s;
  const std::string inner = params.get_string("inner");
  const std::vector<sdk::Param> forwarded = params.forwarded("inner.");
  s.dir = params.get_string("dir");
  const auto max_mb = params.get_int<std::uint64_t>("max_mb");
  const auto block_kb = params.get_int<std::uint64_t>("block_kb");
  const auto pending_mb = params.get_int<std::uint64_t>("max_pending_mb");
  s.fsync = params.get_bool("fsync");
  unknown_params = params.unused();
  s.block_bytes = block_kb << 10;
  s.max_bytes = max_mb << 20;
  s.max_pending_bytes = pending_mb << 20;
  std::unique_ptr<sdk::StorageBackend> wrapped;
  if (sdk::Status made = local::create_inner(args.host, "tiered", inner, forwarded, wrapped); !made.ok()) return made;
  auto t = std::make_shared<Tier>(std::move(s), args.host);
  try {
    if (sdk::Status started = t->start(); !started.ok()) return started;
  } catch (const std::exception& e) {
    return sdk::Status::error(sdk::StatusCode::io_error,
                              "tiered: cannot open the tier directory: " + std::string(e.what()));
  }
  out = std::make_unique<TieredBackend>(std::move(wrapped), std::move(t));
  return sdk::Status::success();
}

}  // namespace k3::storage::tiered

K3_PLUGIN(storage, "tiered", "1.0.0", k3::storage::tiered::create, nullptr)
K3_PLUGIN_PARAMS(k3::storage::tiered::kParams)
