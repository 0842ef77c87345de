#include "model/tensor_reader.hpp"

#include <algorithm>
#include <map>

#include <k3/error.hpp>

namespace k3::model {
namespace {

std::string shape_str(const std::vector<std::uint64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

sdk::Status read_with_retry(sdk::StorageFile& file, std::span<sdk::ReadRequest> batch, int attempts) {
  sdk::Status st = file.read(batch);
  for (int attempt = 1; attempt < attempts && !st.ok(); ++attempt) {
    std::vector<std::size_t> failed;
    std::vector<sdk::ReadRequest> again;
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i].result != sdk::StatusCode::ok) {
        failed.push_back(i);
        again.push_back({batch[i].offset, batch[i].length, batch[i].dest, sdk::StatusCode::ok});
      }
    if (again.empty()) break;  // a failure without a failed request: nothing to retry
    st = file.read(again);
    for (std::size_t k = 0; k < failed.size(); ++k) batch[failed[k]].result = again[k].result;
  }
  return st;
}

TensorReader::TensorReader(const CheckpointIndex& index, sdk::StorageBackend& storage)
    : index_(index), storage_(storage), files_(index.files().size()) {}

TensorReader::~TensorReader() = default;

std::size_t TensorReader::want(const std::string& name, DType dtype, const std::vector<std::uint64_t>& shape) {
  const TensorInfo& info = index_.require(name, dtype, shape);
  wanted_.push_back({&info, 0});
  return wanted_.size() - 1;
}

std::size_t TensorReader::want_any(const std::string& name, DType dtype,
                                   const std::vector<std::vector<std::uint64_t>>& shapes) {
  const TensorInfo* info = index_.find(name);
  if (info != nullptr && info->dtype == dtype)
    for (const auto& s : shapes)
      if (info->shape == s) {
        wanted_.push_back({info, 0});
        return wanted_.size() - 1;
      }
  // Let require() produce the precise message (missing / dtype / shape) for the first form.
  std::string alternatives;
  for (const auto& s : shapes) alternatives += (alternatives.empty() ? "" : " or ") + shape_str(s);
  if (info == nullptr || info->dtype != dtype) (void)index_.require(name, dtype, shapes.front());
  throw UsageError(index_.files()[info->file].path.string() + ": tensor '" + name + "': shape " +
                   shape_str(info->shape) + ", expected " + alternatives);
}

sdk::StorageFile& TensorReader::file(std::uint32_t i) {
  if (!files_[i]) {
    const std::string path = index_.files()[i].path.string();
    const sdk::Status st = storage_.open(path, files_[i]);
    if (!st.ok()) throw RuntimeError(path + ": cannot open through the storage plugin: " + st.detail);
    if (files_[i]->size() != index_.files()[i].size)
      throw RuntimeError(path + ": storage reports " + std::to_string(files_[i]->size()) + " bytes, index saw " +
                         std::to_string(index_.files()[i].size));
  }
  return *files_[i];
}

std::uint64_t TensorReader::layout() {
  std::uint64_t total = 0;
  for (auto& w : wanted_) {
    total = (total + 63) / 64 * 64;
    w.buffer_offset = total;
    total += w.info->nbytes;
  }
  return total;
}

AlignedBuffer TensorReader::read_all() {
  AlignedBuffer buf(layout());
  read_into(buf.data());
  return buf;
}

void TensorReader::read_into(std::byte* base) {
  // One batch per shard, sorted by offset.
  std::map<std::uint32_t, std::vector<std::size_t>> by_file;
  for (std::size_t i = 0; i < wanted_.size(); ++i) by_file[wanted_[i].info->file].push_back(i);
  for (auto& [fi, handles] : by_file) {
    std::sort(handles.begin(), handles.end(),
              [&](std::size_t a, std::size_t b) { return wanted_[a].info->offset < wanted_[b].info->offset; });
    std::vector<sdk::ReadRequest> batch;
    batch.reserve(handles.size());
    for (std::size_t h : handles)
      batch.push_back({wanted_[h].info->offset, wanted_[h].info->nbytes, base + wanted_[h].buffer_offset,
                       sdk::StatusCode::ok});
    const sdk::Status st = read_with_retry(file(fi), batch);
    if (!st.ok()) {
      std::string tensor;
      for (std::size_t j = 0; j < batch.size(); ++j)
        if (batch[j].result != sdk::StatusCode::ok) {
          tensor = wanted_[handles[j]].info->name;
          break;
        }
      throw RuntimeError(index_.files()[fi].path.string() + ": reading tensor '" + tensor + "' failed: " + st.detail);
    }
    for (std::size_t h : handles) bytes_read_ += wanted_[h].info->nbytes;
  }
}

const std::byte* TensorReader::data(const AlignedBuffer& buf, std::size_t handle) const {
  return buf.data() + wanted_[handle].buffer_offset;
}

}  // namespace k3::model
