#include "streaming/tensor_reader.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

#include <k3/error.hpp>

#include "io/pack_trunk_codec.hpp"
#include "io/read_failure.hpp"
#include "io/xxh3.hpp"

namespace k3::streaming {
namespace {

std::uint64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
}

std::string shape_str(const std::vector<std::uint64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

sdk::Status read_with_retry(sdk::StorageFile& file, std::span<sdk::ReadRequest> batch, int attempts) {
  sdk::Status st = file.read(batch);
  for (int attempt = 1; attempt < attempts && !st.ok() && io::worth_retrying(st.code); ++attempt) {
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

PackedLocations PackedLocations::of(const PackedTrunk& trunk) {
  PackedLocations out;
  out.bin = trunk.bin_uri();
  out.bin_bytes = trunk.bin_bytes();
  out.row_sums = trunk.row_sums();  // before the checks point into it; a move keeps its buffer
  const std::span<const std::uint64_t> table(out.row_sums);
  for (const auto* runs : {&trunk.layers(), &trunk.globals()})
    for (const PackedRun& run : *runs) {
      for (const PackedTensor& t : run.tensors) {
        const std::uint64_t offset = run.file_offset + (run.coded() ? t.coded_offset : t.offset);
        io::trunk_check::TensorCheck check{trunk.bin_uri(), run.name, t.name, offset,
                                           run.coded(),     t.xxh3,   {},     t.row_bytes()};
        if (t.row_sums >= 0)  // PackedTrunk::open checked the rows lie inside the table
          check.rows = table.subspan(static_cast<std::size_t>(t.row_sums), static_cast<std::size_t>(t.shape[0]));
        out.where.emplace(t.name, Where{offset, t.coded_bytes, out.runs.size(), std::move(check)});
      }
      out.runs.push_back(run.name);
    }
  return out;
}

TensorReader::TensorReader(const CheckpointIndex& index, sdk::StorageBackend& storage, const PackedLocations* packed)
    : index_(index), storage_(storage), packed_(packed), files_(index.files().size() + 1) {}

struct TensorReader::HashState {
  struct Free {
    void operator()(XXH3_state_t* s) const noexcept { XXH3_freeState(s); }
  };
  std::unique_ptr<XXH3_state_t, Free> state{XXH3_createState()};
};

TensorReader::~TensorReader() = default;

TensorReader::Source TensorReader::source_of(const TensorInfo& info, bool raw_only) const {
  if (packed_ != nullptr)
    if (const auto it = packed_->where.find(info.name); it != packed_->where.end())
      if (!(raw_only && it->second.coded_bytes != 0))
        return {static_cast<std::uint32_t>(index_.files().size()), it->second.offset, it->second.coded_bytes};
  return {info.file, info.offset, 0};
}

void TensorReader::add(const TensorInfo& info) {
  const Source src = source_of(info);
  wanted_.push_back({&info, 0, src.file, src.offset, src.coded_bytes});
}

std::size_t TensorReader::want(const std::string& name, DType dtype, const std::vector<std::uint64_t>& shape) {
  add(index_.require(name, dtype, shape));
  return wanted_.size() - 1;
}

std::size_t TensorReader::want(const TensorInfo& info) {
  add(info);
  return wanted_.size() - 1;
}

std::size_t TensorReader::want_any(const std::string& name, DType dtype,
                                   const std::vector<std::vector<std::uint64_t>>& shapes) {
  const TensorInfo* info = index_.find(name);
  if (info != nullptr && info->dtype == dtype)
    for (const auto& s : shapes)
      if (info->shape == s) {
        add(*info);
        return wanted_.size() - 1;
      }
  // Let require() produce the precise message (missing / dtype / shape) for the first form.
  std::string alternatives;
  for (const auto& s : shapes) alternatives += (alternatives.empty() ? "" : " or ") + shape_str(s);
  if (info == nullptr || info->dtype != dtype) (void)index_.require(name, dtype, shapes.front());
  throw UsageError(index_.files()[info->file].uri + ": tensor '" + name + "': shape " + shape_str(info->shape) +
                   ", expected " + alternatives);
}

std::string TensorReader::file_name(std::uint32_t i) const {
  return i < index_.files().size() ? index_.files()[i].uri : packed_->bin.string();
}

sdk::StorageFile& TensorReader::file(std::uint32_t i) {
  const bool bin = i == index_.files().size();
  if (bin && packed_ == nullptr) throw RuntimeError("tensor reader: no packed trunk to read from");
  if (!files_[i]) {
    const std::string path = file_name(i);
    const sdk::Status st = storage_.open(path, files_[i]);
    if (!st.ok()) io::throw_read_failure(st.code, path + ": cannot open through the storage plugin: " + st.detail);
    const std::uint64_t expected = bin ? packed_->bin_bytes : index_.files()[i].size;
    if (files_[i]->size() != expected)
      throw RuntimeError(path + ": storage reports " + std::to_string(files_[i]->size()) + " bytes, " +
                         (bin ? "trunk.json says " : "index saw ") + std::to_string(expected));
  }
  return *files_[i];
}

TensorSource TensorReader::locate(const TensorInfo& t) {
  const Source src = source_of(t, true);
  const bool bin = src.file == index_.files().size();
  return {&file(src.file), src.offset, file_name(src.file), bin ? &packed_->where.at(t.name).check : nullptr};
}

std::uint64_t TensorReader::layout() {
  // Queue order; with a packed trunk, in file order, so that a packed run (64-byte aligned
  // tensors, like here) lands byte for byte and is read as one request.
  std::vector<std::size_t> order(wanted_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (packed_ != nullptr)
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::pair(wanted_[a].src_file, wanted_[a].src_offset) <
             std::pair(wanted_[b].src_file, wanted_[b].src_offset);
    });
  std::uint64_t total = 0;
  for (std::size_t i : order) {
    Wanted& w = wanted_[i];
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

void TensorReader::read_into(std::byte* base) { read(plan(), base); }

ReadPlan TensorReader::plan() {
  ReadPlan out;
  out.bytes = layout();
  out.tensors.reserve(wanted_.size());
  for (const Wanted& w : wanted_) {
    std::size_t run = 0;
    const io::trunk_check::TensorCheck* check = nullptr;
    if (w.src_file == index_.files().size()) {
      const PackedLocations::Where& where = packed_->where.at(w.info->name);
      run = where.run;
      check = &where.check;
    }
    out.tensors.push_back({w.info, w.buffer_offset, w.src_offset, w.coded_bytes, run, check});
  }
  // One batch per file, sorted by offset. Neighbours whose gap is the same in the file and
  // in memory (alignment padding of a packed run) are merged into one request.
  constexpr std::uint64_t kMaxGap = 4096;
  std::map<std::uint32_t, std::vector<std::size_t>> by_file;
  for (std::size_t i = 0; i < wanted_.size(); ++i) by_file[wanted_[i].src_file].push_back(i);
  std::size_t most = 0;
  for (auto& [fi, handles] : by_file) {
    std::sort(handles.begin(), handles.end(),
              [&](std::size_t a, std::size_t b) { return wanted_[a].src_offset < wanted_[b].src_offset; });
    ReadPlan::File& file = out.files.emplace_back();
    file.index = fi;
    file.order = handles;
    for (std::size_t k = 0; k < handles.size(); ++k) {
      const std::size_t h = handles[k];
      const Wanted& w = wanted_[h];
      file.bytes += w.coded_bytes != 0 ? w.coded_bytes : w.info->nbytes;
      if (w.coded_bytes != 0) {
        // Coded streams of one run lie back to back (64-byte aligned), as do their tensors.
        if (!file.requests.empty() && file.requests.back().coded) {
          ReadPlan::Request& last = file.requests.back();
          const Wanted& prev = wanted_[handles[k - 1]];
          const std::uint64_t src_end = last.src_offset + last.length;
          const std::uint64_t dst_end = prev.buffer_offset + prev.info->nbytes;
          if (w.src_offset >= src_end && w.src_offset - src_end < kTrunkTensorAlign && w.buffer_offset >= dst_end &&
              w.buffer_offset - dst_end < kTrunkTensorAlign) {
            last.length = w.src_offset + w.coded_bytes - last.src_offset;
            ++last.count;
            continue;
          }
        }
        file.requests.push_back({w.src_offset, w.coded_bytes, w.buffer_offset, h, true, k, 1});
        continue;
      }
      if (!file.requests.empty() && !file.requests.back().coded) {
        ReadPlan::Request& last = file.requests.back();
        const std::uint64_t src_end = last.src_offset + last.length;
        const std::uint64_t dst_end = last.buffer_offset + last.length;
        if (w.src_offset >= src_end && w.buffer_offset >= dst_end && w.src_offset - src_end <= kMaxGap &&
            w.buffer_offset - dst_end == w.src_offset - src_end) {
          last.length = w.src_offset + w.info->nbytes - last.src_offset;
          continue;
        }
      }
      file.requests.push_back({w.src_offset, w.info->nbytes, w.buffer_offset, h});
    }
    most = std::max(most, file.requests.size());
  }
  batch_.reserve(most);
  return out;
}

void TensorReader::read(const ReadPlan& plan, std::byte* base) {
  for (const ReadPlan::File& f : plan.files) {
    if (packed_ != nullptr && f.index == index_.files().size()) {  // trunk.bin: every byte checked as it lands
      read_raw_checked(plan, f, base);
      for (const ReadPlan::Request& r : f.requests)
        if (r.coded) read_coded(plan, f, r, base);
      bytes_read_ += f.bytes;
      continue;
    }
    batch_.clear();  // keeps the capacity plan() reserved
    for (const ReadPlan::Request& r : f.requests)
      if (!r.coded) batch_.push_back({r.src_offset, r.length, base + r.buffer_offset, sdk::StatusCode::ok});
    const sdk::Status st = batch_.empty() ? sdk::Status{} : read_with_retry(file(f.index), batch_);
    if (!st.ok()) {
      std::string tensor;
      std::size_t j = 0;
      for (const ReadPlan::Request& r : f.requests)
        if (!r.coded && batch_[j++].result != sdk::StatusCode::ok) {
          tensor = plan.tensors[r.tensor].info->name;
          break;
        }
      io::throw_read_failure(st.code, file_name(f.index) + ": reading tensor '" + tensor + "' failed: " + st.detail);
    }
    for (const ReadPlan::Request& r : f.requests)
      if (r.coded) read_coded(plan, f, r, base);
    bytes_read_ += f.bytes;
  }
}

void TensorReader::read_raw_checked(const ReadPlan& plan, const ReadPlan::File& f, std::byte* base) {
  // The pieces of the raw requests, in file order: piece k+1 is read on the read-ahead
  // thread while piece k is hashed here. The tensors of f.order are in file order too, so
  // one cursor walks them; a tensor never spans two requests (requests merge whole tensors).
  struct Piece {
    std::size_t request = 0;
    std::uint64_t at = 0, length = 0;  ///< file offset, bytes
  };
  const auto first_from = [&](std::size_t j) {  // the first piece of the first raw request from j
    for (; j < f.requests.size(); ++j)
      if (!f.requests[j].coded && f.requests[j].length > 0)
        return Piece{j, f.requests[j].src_offset, std::min(raw_piece_, f.requests[j].length)};
    return Piece{f.requests.size(), 0, 0};
  };
  const auto after = [&](const Piece& p) {
    const ReadPlan::Request& r = f.requests[p.request];
    const std::uint64_t end = r.src_offset + r.length, at = p.at + p.length;
    return at < end ? Piece{p.request, at, std::min(raw_piece_, end - at)} : first_from(p.request + 1);
  };
  const auto dest = [&](const Piece& p) {
    const ReadPlan::Request& r = f.requests[p.request];
    return base + r.buffer_offset + (p.at - r.src_offset);
  };
  Piece cur = first_from(0);
  if (cur.request == f.requests.size()) return;
  if (!ahead_) ahead_ = std::make_unique<io::trunk_codec::ReadAhead>();
  if (!hash_) {
    hash_ = std::make_unique<HashState>();
    if (!hash_->state) throw std::bad_alloc();
  }
  sdk::StorageFile& bin = file(f.index);
  XXH3_state_t* state = hash_->state.get();
  bool in_flight = false;
  struct Drain {  // a piece still being read into the caller's memory is waited for, even on an error
    io::trunk_codec::ReadAhead& ahead;
    bool& in_flight;
    ~Drain() {
      if (in_flight) (void)ahead.wait();
    }
  } drain{*ahead_, in_flight};
  ahead_->submit(bin, {cur.at, cur.length, dest(cur), sdk::StatusCode::ok});
  in_flight = true;
  std::size_t cursor = 0;  // into f.order: the next raw tensor not yet checked
  bool started = false;    // the tensor at the cursor has bytes in `state`
  while (cur.request < f.requests.size()) {
    sdk::Status st = ahead_->wait();
    in_flight = false;
    for (int attempt = 1; attempt < 3 && !st.ok(); ++attempt) {  // a transient fault (EIO, a short read) recovers
      sdk::ReadRequest again{cur.at, cur.length, dest(cur), sdk::StatusCode::ok};
      st = bin.read({&again, 1});
    }
    if (!st.ok())
      throw RuntimeError(file_name(f.index) + ": reading tensor '" +
                         plan.tensors[f.requests[cur.request].tensor].info->name + "' failed: " + st.detail);
    const Piece next = after(cur);
    if (next.request < f.requests.size()) {
      ahead_->submit(bin, {next.at, next.length, dest(next), sdk::StatusCode::ok});
      in_flight = true;
    }
    // Hash what this piece holds of each raw tensor; check the ones it completes.
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t p0 = cur.at, p1 = cur.at + cur.length;
    for (; cursor < f.order.size(); ++cursor) {
      const ReadPlan::Tensor& t = plan.tensors[f.order[cursor]];
      if (t.coded_bytes != 0) continue;
      const std::uint64_t ts = t.src_offset, te = ts + t.info->nbytes;
      if (ts >= p1) break;
      if (!started) {
        XXH3_64bits_reset(state);
        started = true;
      }
      const std::uint64_t from = std::max(p0, ts), to = std::min(p1, te);
      if (to > from)
        XXH3_64bits_update(state, base + t.buffer_offset + (from - ts), static_cast<std::size_t>(to - from));
      if (te > p1) break;  // continues in the next piece
      t.check->digest_is(XXH3_64bits_digest(state), t.info->nbytes);
      started = false;
    }
    verify_ns_ += elapsed_ns(t0);
    cur = next;
  }
}

void TensorReader::read_coded(const ReadPlan& plan, const ReadPlan::File& f, const ReadPlan::Request& r,
                              std::byte* base) {
  if (!decoder_) {
    decoder_ = std::make_unique<io::trunk_codec::Decoder>();
    ahead_ = std::make_unique<io::trunk_codec::ReadAhead>();
  }
  io::trunk_codec::FileInput in(file(f.index), r.src_offset, r.src_offset + r.length, staging_, coded_piece_,
                                ahead_.get());
  std::uint64_t at = r.src_offset, raw_end = r.buffer_offset;
  for (std::size_t k = r.first; k < r.first + r.count; ++k) {
    const ReadPlan::Tensor& t = plan.tensors[f.order[k]];
    std::memset(base + raw_end, 0, static_cast<std::size_t>(t.buffer_offset - raw_end));  // padding, as in the run
    const auto context = [&] {
      return file_name(f.index) + ": " + packed_->runs[t.run] + ", tensor '" + t.info->name + "': ";
    };
    try {
      in.skip(t.src_offset - at);
      const std::uint64_t n = decoder_->decode(in, {base + t.buffer_offset, static_cast<std::size_t>(t.info->nbytes)},
                                               t.info->dtype == DType::bf16);
      if (n != t.coded_bytes)
        throw io::trunk_codec::CodecError("the stream is " + std::to_string(n) + " bytes, trunk.json says " +
                                          std::to_string(t.coded_bytes));
    } catch (const io::trunk_codec::CodecError& e) {
      throw RuntimeError(context() + "damaged coded stream (repack with k3host pack-trunk): " + e.what());
    } catch (const RuntimeError& e) {
      throw RuntimeError(context() + e.what());
    }
    const auto t0 = std::chrono::steady_clock::now();
    t.check->whole(base + t.buffer_offset, t.info->nbytes);  // what it decoded to, before anyone uses it
    verify_ns_ += elapsed_ns(t0);
    at = t.src_offset + t.coded_bytes;
    raw_end = t.buffer_offset + t.info->nbytes;
  }
  coded_bytes_read_ += r.length;
}

const std::byte* TensorReader::data(const AlignedBuffer& buf, std::size_t handle) const {
  return buf.data() + wanted_[handle].buffer_offset;
}

}  // namespace k3::streaming
