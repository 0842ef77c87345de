#include "streaming/row_chunks.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include <k3/error.hpp>

#include "io/read_failure.hpp"
#include "streaming/tensor_reader.hpp"

namespace k3::streaming {

RowChunkStreamer::RowChunkStreamer(std::vector<sdk::StorageFile*> files, std::uint64_t chunk_bytes,
                                   StreamCounters& counters)
    : files_(std::move(files)), chunk_bytes_(chunk_bytes), counters_(counters) {
  for (auto& b : buffers_) b = AlignedBuffer(chunk_bytes_);
  // One job is outstanding at a time (see matmul).
  reader_.start(
      2, [this](Job& job) { read(job); },
      [this](Job& job, std::exception_ptr error) {
    error_[job.buffer] = std::move(error);
    ready_[job.buffer] = true;
      });
}

RowChunkStreamer::~RowChunkStreamer() = default;

void RowChunkStreamer::read(const Job& job) {
  const TensorLocation& w = *job.where;
  const std::uint64_t row = w.info->shape[1] * element_size(w.info->dtype);
  sdk::ReadRequest req{w.offset + job.first * row, job.count * row, buffers_[job.buffer].data(), sdk::StatusCode::ok};
  sdk::Status st;
  {
    ScopedTimer t(counters_.read_ns);
    st = streaming::read_with_retry(*files_[w.file], {&req, 1});
  }
  if (!st.ok())
    io::throw_read_failure(st.code, "reading rows " + std::to_string(job.first) + "…" +
                                        std::to_string(job.first + job.count - 1) + " of '" + w.info->name +
                                        "' failed: " + st.detail);
  (job.table ? counters_.table_bytes : counters_.trunk_bytes) += job.count * row;
  if (w.check != nullptr) {  // rows of a packed trunk: checked here, overlapped with the multiply of the other chunk
    ScopedTimer t(counters_.verify_ns);
    w.check->rows_at(buffers_[job.buffer].data(), job.first, job.count);
  }
}

void RowChunkStreamer::submit(const Job& job) {
  auto lk = reader_.lock();
  ready_[job.buffer] = false;
  error_[job.buffer] = nullptr;
  reader_.push(job);
}

void RowChunkStreamer::wait(int buffer) {
  auto lk = reader_.lock();
  {
    ScopedTimer t(counters_.io_wait_ns);
    reader_.wait(lk, [&] { return ready_[buffer]; });
  }
  if (error_[buffer]) std::rethrow_exception(std::exchange(error_[buffer], nullptr));
}

void RowChunkStreamer::matmul(const maths::Ops& ops, const TensorLocation& where, const float* x, std::size_t n,
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
    auto lk = reader_.lock();
    reader_.wait(lk, [&] { return reader_.idle(); });
  }
  // Chunk i lives in buffer i % 2: the reader fills chunk i+1 while chunk i is multiplied.
  // Only one job is outstanding at a time, so a buffer is never refilled while in use.
  submit({&where, 0, std::min(per_chunk, rows), 0, table});
  for (std::uint64_t first = 0, i = 0; first < rows; first += per_chunk, ++i) {
    const std::uint64_t count = std::min(per_chunk, rows - first);
    const int buf = static_cast<int>(i % 2);
    wait(buf);
    if (first + count < rows)
      submit({&where, first + count, std::min(per_chunk, rows - first - count), 1 - buf, table});
    const maths::Matrix chunk{buffers_[buf].data(), count, cols, f32};
    if (n == 1) {
      ops.matmul(chunk, x, 1, out + first);
      continue;
    }
    out_.resize(n * count);
    ops.matmul(chunk, x, n, out_.data());
    for (std::size_t t = 0; t < n; ++t) std::memcpy(out + t * rows + first, out_.data() + t * count, count * 4);
  }
}

}  // namespace k3::streaming
