#include "streaming/row_chunks.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include <k3/error.hpp>

#include "streaming/tensor_reader.hpp"

namespace k3::runtime {

RowChunkStreamer::RowChunkStreamer(std::vector<sdk::StorageFile*> files, std::uint64_t chunk_bytes,
                                   StreamCounters& counters)
    : files_(std::move(files)), chunk_bytes_(chunk_bytes), counters_(counters) {
  for (auto& b : buffers_) b = AlignedBuffer(chunk_bytes_);
  reader_ = std::thread([this] { reader_loop(); });
}

RowChunkStreamer::~RowChunkStreamer() {
  {
    std::lock_guard<std::mutex> lk(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reader_.joinable()) reader_.join();
}

void RowChunkStreamer::reader_loop() {
  std::unique_lock<std::mutex> lk(m_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || have_job_; });
    if (stop_) return;
    const Job job = job_;
    have_job_ = false;
    busy_ = true;
    const bool table = table_;
    lk.unlock();
    const TensorLocation& w = *job.where;
    const std::uint64_t row = w.info->shape[1] * element_size(w.info->dtype);
    sdk::ReadRequest req{w.offset + job.first * row, job.count * row, buffers_[job.buffer].data(), sdk::StatusCode::ok};
    std::exception_ptr error;
    try {
      sdk::Status st;
      {
        ScopedTimer t(counters_.read_ns);
        st = model::read_with_retry(*files_[w.file], {&req, 1});
      }
      if (!st.ok())
        throw RuntimeError("reading rows " + std::to_string(job.first) + "…" + std::to_string(job.first + job.count - 1) +
                           " of '" + w.info->name + "' failed: " + st.detail);
      (table ? counters_.table_bytes : counters_.trunk_bytes) += job.count * row;
    } catch (...) {
      error = std::current_exception();
    }
    lk.lock();
    error_[job.buffer] = error;
    ready_[job.buffer] = true;
    busy_ = false;
    cv_.notify_all();
  }
}

void RowChunkStreamer::submit(const Job& job) {
  std::lock_guard<std::mutex> lk(m_);
  job_ = job;
  have_job_ = true;
  ready_[job.buffer] = false;
  error_[job.buffer] = nullptr;
  cv_.notify_all();
}

void RowChunkStreamer::wait(int buffer) {
  std::unique_lock<std::mutex> lk(m_);
  {
    ScopedTimer t(counters_.io_wait_ns);
    cv_.wait(lk, [&] { return ready_[buffer]; });
  }
  if (error_[buffer]) std::rethrow_exception(std::exchange(error_[buffer], nullptr));
}

void RowChunkStreamer::matmul(const model::Ops& ops, const TensorLocation& where, const float* x, std::size_t n,
                              float* out, bool table) {
  const std::uint64_t rows = where.info->shape[0], cols = where.info->shape[1];
  const bool f32 = where.info->dtype == DType::f32;  // else bf16 (the tensor table checked it)
  const std::uint64_t row_bytes = cols * element_size(where.info->dtype);
  if (row_bytes > chunk_bytes_)
    throw RuntimeError("row chunks of " + std::to_string(chunk_bytes_) + " bytes cannot hold one row of '" +
                       where.info->name + "' (" + std::to_string(row_bytes) + " bytes)");
  const std::uint64_t per_chunk = std::min(rows, chunk_bytes_ / row_bytes);
  {
    // A previous call that ended in an exception may have left a read in flight.
    std::unique_lock<std::mutex> lk(m_);
    cv_.wait(lk, [&] { return !have_job_ && !busy_; });
    table_ = table;
  }
  // Chunk i lives in buffer i % 2: the reader fills chunk i+1 while chunk i is multiplied.
  // Only one job is outstanding at a time, so a buffer is never refilled while in use.
  submit({&where, 0, std::min(per_chunk, rows), 0});
  for (std::uint64_t first = 0, i = 0; first < rows; first += per_chunk, ++i) {
    const std::uint64_t count = std::min(per_chunk, rows - first);
    const int buf = static_cast<int>(i % 2);
    wait(buf);
    if (first + count < rows) submit({&where, first + count, std::min(per_chunk, rows - first - count), 1 - buf});
    const model::Matrix chunk{buffers_[buf].data(), count, cols, f32};
    if (n == 1) {
      ops.matmul(chunk, x, 1, out + first);
      continue;
    }
    out_.resize(n * count);
    ops.matmul(chunk, x, n, out_.data());
    for (std::size_t t = 0; t < n; ++t) std::memcpy(out + t * rows + first, out_.data() + t * count, count * 4);
  }
}

}  // namespace k3::runtime
