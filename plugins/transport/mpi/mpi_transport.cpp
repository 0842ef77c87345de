// Transport `mpi` (sdk/k3/transport.hpp): MPI point-to-point messages of raw bytes between
// the ranks of MPI_COMM_WORLD. Waits poll and sleep so that oversubscribed ranks do not
// spin; a wait gives up at its deadline or when the host asks the run to stop.
#include <dlfcn.h>
// MPI's C interface only: the C++ bindings would tie the plugin to libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <k3/plugin.hpp>

namespace {

using k3::sdk::Status;
using k3::sdk::StatusCode;
using Clock = std::chrono::steady_clock;

constexpr int kTag = 3;  // every k3host message; order between two ranks is MPI's

/// Open MPI dlopens its components, which expect libmpi's and libopen-pal's symbols in the
/// global scope; the host opened this plugin (and so libmpi) RTLD_LOCAL. Reopening the
/// libraries already loaded with RTLD_GLOBAL | RTLD_NOLOAD promotes them and loads nothing.
void promote_mpi_libraries() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname != nullptr)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  for (const char* name : {"libopen-pal.so.40", "libopen-rte.so.40", "libopen-pal.so", "libopen-rte.so"})
    (void)dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

void finalize_mpi() {
  int done = 0;
  MPI_Finalized(&done);
  if (done == 0) MPI_Finalize();
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int n = 0;
  MPI_Error_string(code, text, &n);
  return std::string(text, static_cast<std::size_t>(std::max(0, n)));
}

class MpiTransport final : public k3::sdk::Transport {
 public:
  MpiTransport(k3::sdk::HostServices* host, std::uint32_t poll_us) : host_(host), poll_us_(poll_us) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Errors come back as codes (turned into a Status), never as MPI's own abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  ~MpiTransport() override {
    // Messages never confirmed (the run ended on a failure): MPI completes or drops them
    // on its own; the requests are only released here.
    for (auto& entry : posted_) MPI_Request_free(&entry.second);
  }
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return size_; }

  /// The peer checked and the message handed to MPI (send waits for it, post does not).
  Status start_send(int dest, std::span<const std::byte> bytes, MPI_Request& req) noexcept {
    if (Status bad = check_peer(dest, bytes.size()); !bad.ok()) return bad;
    if (const int rc =
            MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, kTag, MPI_COMM_WORLD, &req);
        rc != MPI_SUCCESS)
      return Status::error(StatusCode::io_error, "sending to rank " + std::to_string(dest) + ": " + mpi_error(rc));
    return Status::success();
  }

  Status send(int dest, std::span<const std::byte> bytes, std::uint32_t timeout_ms) noexcept override {
    MPI_Request req = MPI_REQUEST_NULL;
    if (Status st = start_send(dest, bytes, req); !st.ok()) return st;
    Waiter w(*this, timeout_ms);
    for (;;) {
      int flag = 0;
      if (const int rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
        return Status::error(StatusCode::io_error, "sending to rank " + std::to_string(dest) + ": " + mpi_error(rc));
      if (flag != 0) return Status::success();
      if (Status st = w.pause("sending " + std::to_string(bytes.size()) + " bytes to rank " + std::to_string(dest));
          !st.ok()) {
        // Withdrawn only if the cancel took: a message the peer matched meanwhile was sent.
        MPI_Status status{};
        MPI_Cancel(&req);
        MPI_Wait(&req, &status);
        int cancelled = 0;
        MPI_Test_cancelled(&status, &cancelled);
        return cancelled != 0 ? st : Status::success();
      }
    }
  }

  Status post(int dest, std::span<const std::byte> bytes, std::uint64_t& ticket) noexcept override {
    MPI_Request req = MPI_REQUEST_NULL;
    if (Status st = start_send(dest, bytes, req); !st.ok()) return st;
    ticket = ++tickets_;
    try {
      posted_.emplace(ticket, req);
    } catch (...) {
      MPI_Request_free(&req);
      return Status::error(StatusCode::io_error, "out of memory posting a message");
    }
    return Status::success();
  }

  Status sent(std::uint64_t ticket, bool& done) noexcept override {
    done = false;
    const auto it = posted_.find(ticket);
    if (it == posted_.end())
      return Status::error(StatusCode::invalid_argument, "no message posted as " + std::to_string(ticket));
    int flag = 0;
    if (const int rc = MPI_Test(&it->second, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
      return Status::error(StatusCode::io_error, "a posted message: " + mpi_error(rc));
    if (flag != 0) {
      posted_.erase(it);
      done = true;
    }
    return Status::success();
  }

  Status recv(int src, std::span<std::byte> bytes, std::uint32_t timeout_ms) noexcept override {
    if (Status bad = check_peer(src, bytes.size()); !bad.ok()) return bad;
    Waiter w(*this, timeout_ms);
    MPI_Status status{};
    for (;;) {
      int flag = 0;
      if (const int rc = MPI_Iprobe(src, kTag, MPI_COMM_WORLD, &flag, &status); rc != MPI_SUCCESS)
        return Status::error(StatusCode::io_error, "receiving from rank " + std::to_string(src) + ": " + mpi_error(rc));
      if (flag != 0) break;
      if (Status st = w.pause("waiting for a message from rank " + std::to_string(src)); !st.ok()) return st;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count < 0 || static_cast<std::size_t>(count) != bytes.size())
      return Status::error(StatusCode::invalid_argument, "a message of " + std::to_string(count) + " bytes from rank " +
                                                             std::to_string(src) + " where " +
                                                             std::to_string(bytes.size()) + " were expected");
    if (const int rc = MPI_Recv(bytes.data(), count, MPI_BYTE, src, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        rc != MPI_SUCCESS)
      return Status::error(StatusCode::io_error, "receiving from rank " + std::to_string(src) + ": " + mpi_error(rc));
    return Status::success();
  }

  void abort(int code, std::string_view reason) noexcept override {
    if (host_ != nullptr)
      host_->log(k3::sdk::LogLevel::error, "",
                 "rank " + std::to_string(rank_) + " aborts the job: " + std::string(reason));
    MPI_Abort(MPI_COMM_WORLD, code);
  }

 private:
  /// Sleeps between polls (doubling up to poll_us) until the deadline or a stop request.
  class Waiter {
   public:
    Waiter(const MpiTransport& t, std::uint32_t timeout_ms)
        : t_(t), deadline_(Clock::now() + std::chrono::milliseconds(timeout_ms)) {}
    Status pause(const std::string& what) {
      if (t_.host_ != nullptr && t_.host_->stop_requested())
        return Status::error(StatusCode::interrupted, what + ": stopped");
      if (Clock::now() >= deadline_) return Status::error(StatusCode::timed_out, what + ": timed out");
      std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
      sleep_us_ = std::min<std::uint32_t>(std::max<std::uint32_t>(1, t_.poll_us_), sleep_us_ * 2);
      return Status::success();
    }

   private:
    const MpiTransport& t_;
    Clock::time_point deadline_;
    std::uint32_t sleep_us_ = 1;
  };

  [[nodiscard]] Status check_peer(int peer, std::size_t bytes) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      return Status::error(StatusCode::invalid_argument, "rank " + std::to_string(peer) + " is not a peer of rank " +
                                                             std::to_string(rank_) + " in a job of " +
                                                             std::to_string(size_));
    if (bytes > static_cast<std::size_t>(INT_MAX))
      return Status::error(StatusCode::invalid_argument,
                           "a message of " + std::to_string(bytes) + " bytes exceeds MPI's count limit");
    return Status::success();
  }

  k3::sdk::HostServices* host_;
  std::uint32_t poll_us_;
  int rank_ = 0, size_ = 1;
  std::unordered_map<std::uint64_t, MPI_Request> posted_;  ///< post()ed, not yet seen sent
  std::uint64_t tickets_ = 0;
};

constexpr k3::sdk::ParamDescriptor kParams[] = {
    k3::sdk::param::integer("poll_us", "200", "[1, 100000]",
                            "the longest sleep between two polls of a waiting send or receive, in microseconds"),
};

Status create(const k3::sdk::CreateArgs& args, std::unique_ptr<k3::sdk::Transport>& out,
              std::vector<std::string>& unknown_params) {
  k3::sdk::ParamReader params(args.params, kParams);
  if (!params.ok()) return params.status();
  const auto poll_us = params.get_int<std::uint32_t>("poll_us");
  unknown_params = params.unused();
  // MPI is joined once per process and left at its exit: MPI cannot be initialised again
  // after MPI_Finalize, and a process under mpirun must finalize before it exits.
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    promote_mpi_libraries();
    int provided = 0;
    // Serialized: the host makes one call at a time, but not always from the same thread
    // (a server's scheduler thread).
    if (const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided); rc != MPI_SUCCESS)
      return Status::error(StatusCode::unsupported, "MPI_Init_thread failed: " + mpi_error(rc));
    std::atexit(finalize_mpi);
    if (provided < MPI_THREAD_SERIALIZED)
      return Status::error(StatusCode::unsupported,
                           "this MPI library offers no MPI_THREAD_SERIALIZED (calls from more than one thread)");
  }
  out = std::make_unique<MpiTransport>(args.host, poll_us);
  return Status::success();
}

}  // namespace

K3_PLUGIN(transport, "mpi", "1.1.0", create, nullptr)
K3_PLUGIN_PARAMS(kParams)
