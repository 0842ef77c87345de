#include "streaming/streamed_trunk.hpp"

#include <algorithm>
#include <cstring>

#include <k3/error.hpp>
#include <k3/geometry.hpp>

#include "io/read_failure.hpp"
#include "model/tensor_table.hpp"

namespace k3::streaming {

StreamedTrunk::StreamedTrunk(const ModelConfig& c, const CheckpointIndex& index, sdk::StorageBackend& storage,
                             const MemoryPlan& plan, StreamCounters& counters, const streaming::PackedLocations* packed)
    : counters_(counters),
      pinned_(plan.pinned),
      head_chunk_rows_(plan.lm_head_chunk_rows),
      main_reader_(index, storage, packed),
      chunk_files_(index, storage, packed),
      ring_reader_(index, storage, packed),
      ring_loader_(c, ring_reader_) {
  const auto layers = static_cast<std::size_t>(c.num_hidden_layers);
  pinned_.resize(layers, false);
  const auto E = static_cast<std::uint64_t>(c.hidden_size), V = static_cast<std::uint64_t>(c.vocab_size);
  table::for_each_embedding_tensor(c, [&](const table::Entry& e, const auto&) {
    embed_info_ = &table::require(index, e);
  });
  table::for_each_head_tensor(c, [&](const table::Entry& e, const auto&) {
    if (e.name == tensor_names::kLmHead) head_info_ = &table::require(index, e);
  });
  embed_src_ = main_reader_.locate(*embed_info_);

  {
    ScopedTimer t(counters_.read_ns);
    global_ = streaming::load_global(c, main_reader_, false, keep_);
    if (head_chunk_rows_ == 0 && plan.holds_head()) {  // lm_head resident
      main_reader_.clear();
      const std::size_t h = main_reader_.want(*head_info_);
      keep_.push_back(main_reader_.read_all());
      global_.lm_head = {main_reader_.data(keep_.back(), h), V, E, head_info_->dtype == DType::f32};
      main_reader_.clear();
    }
    counters_.table_bytes += main_reader_.bytes_read();
  }

  // Split layers (plan.split_dense_ffn): streamed dense layers whose FFN is multiplied while
  // it is read in row chunks, so their ring slot holds only the attention part.
  split_.assign(layers, false);
  bool any_split = false;
  for (std::size_t li = 0; li < layers; ++li) {
    split_[li] = plan.split_dense_ffn && plan.holds_layer(li) && !pinned_[li] &&
                 c.is_dense(static_cast<std::int64_t>(li));
    any_split = any_split || split_[li];
  }
  if (any_split || head_chunk_rows_ != 0) {
    std::vector<sdk::StorageFile*> files;
    auto locate = [&](const TensorInfo& t) {
      const streaming::TensorSource src = chunk_files_.locate(t);
      auto i = static_cast<std::size_t>(std::find(files.begin(), files.end(), src.file) - files.begin());
      if (i == files.size()) files.push_back(src.file);
      return TensorLocation{&t, static_cast<std::uint32_t>(i), src.offset, src.check};
    };
    head_where_ = locate(*head_info_);
    ffn_.resize(layers);
    std::vector<std::array<TensorLocation, 3>> where(layers);
    for (std::size_t li = 0; li < layers; ++li) {
      if (!split_[li]) continue;
      const auto i = static_cast<std::int64_t>(li);
      where[li] = {locate(table::require_layer_tensor(index, c, i, "mlp.gate_proj.weight")),
                   locate(table::require_layer_tensor(index, c, i, "mlp.up_proj.weight")),
                   locate(table::require_layer_tensor(index, c, i, "mlp.down_proj.weight"))};
    }
    row_chunks_ = std::make_unique<RowChunkStreamer>(std::move(files), plan.row_chunk_bytes, counters_);
    for (std::size_t li = 0; li < layers; ++li)
      for (std::size_t k = 0; split_[li] && k < 3; ++k)
        ffn_[li][k] = std::make_unique<StreamedFfnMatrix>(*row_chunks_, where[li][k]);
  }

  // Pinned layers now; every streamed layer is checked (dtype, shape) and sized for a slot.
  streaming::LayerLoader pin_loader(c, main_reader_);
  pinned_layers_.resize(layers);
  std::uint64_t slot_bytes = 0, slot_floats = 0;
  const std::uint64_t before = main_reader_.bytes_read();
  ours_.assign(layers, false);
  for (std::size_t li = 0; li < layers; ++li) {
    if (!plan.holds_layer(li)) continue;  // another rank's (docs/cluster.md)
    ours_[li] = true;
    if (pinned_[li]) {
      ScopedTimer t(counters_.read_ns);
      keep_.emplace_back(pin_loader.queue(li, false));
      pin_loader.read_and_bind(keep_.back().data(), pinned_layers_[li]);
    } else {
      slot_bytes = std::max(slot_bytes, ring_loader_.queue(li, false, split_[li]));
      slot_floats = std::max(slot_floats, ring_loader_.widened_floats());
      ++n_streamed_;
    }
  }
  counters_.trunk_bytes += main_reader_.bytes_read() - before;
  counters_.verify_ns += main_reader_.verify_ns();
  // Room for the router lookahead's copies now (the plan counts them), filled on first use.
  router_copies_.resize(layers);
  if (plan.router_copy_bits != 0)
    for (std::size_t li = 0; li < layers; ++li)
      if (ours_[li] && !pinned_[li] && !c.is_dense(static_cast<std::int64_t>(li)))
        router_copies_[li] = std::make_unique<maths::RouterCopy>(static_cast<std::size_t>(c.num_experts),
                                                                 static_cast<std::size_t>(c.hidden_size),
                                                                 plan.router_copy_bits);
  if (n_streamed_ == 0) return;
  slots_.resize(std::max<std::size_t>(1, std::min(plan.ring_slots, n_streamed_)));
  for (auto& s : slots_) {
    s.buf = AlignedBuffer(slot_bytes);
    s.widened.resize(slot_floats);
  }
  upcoming_.reserve(slots_.size());
  // A slot is queued only when it starts loading, so the queue never holds more than the ring.
  reader_.start(
      slots_.size(), [this](Fill& job) { fill(job); },
      [this](Fill& job, std::exception_ptr error) {
    Slot& slot = slots_[static_cast<std::size_t>(job.slot)];
    slot.error = std::move(error);
    slot.state = SlotState::ready;
      });
}

StreamedTrunk::~StreamedTrunk() = default;

void StreamedTrunk::fill(const Fill& job) {
  // The slot is `loading`: nobody else touches its buffer or bindings until published.
  Slot& slot = slots_[static_cast<std::size_t>(job.slot)];
  const std::size_t layer = job.layer;
  const std::uint64_t before = ring_reader_.bytes_read(), verified = ring_reader_.verify_ns();
  auto count = [&] {
    counters_.trunk_bytes += ring_reader_.bytes_read() - before;
    counters_.verify_ns += ring_reader_.verify_ns() - verified;
  };
  try {
    ScopedTimer t(counters_.read_ns);
    ring_loader_.queue(layer, false, split_[layer]);
    ring_loader_.read_and_bind(slot.buf.data(), slot.w, slot.widened);
    if (split_[layer]) {
      slot.w.dense_w.gate_stream = ffn_[layer][0].get();
      slot.w.dense_w.up_stream = ffn_[layer][1].get();
      slot.w.dense_w.down_stream = ffn_[layer][2].get();
    }
  } catch (...) {
    count();
    throw;
  }
  count();
}

std::span<const std::size_t> StreamedTrunk::upcoming(std::size_t layer) {
  std::vector<std::size_t>& out = upcoming_;  // capacity slots_.size(): never reallocates
  out.clear();
  const std::size_t n = pinned_.size();
  for (std::size_t k = 1; k <= n && out.size() < slots_.size(); ++k) {
    const std::size_t li = (layer + k) % n;
    if (ours_[li] && !pinned_[li] && li != layer) out.push_back(li);
  }
  return out;
}

int StreamedTrunk::slot_of(std::size_t layer) const {
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].state != SlotState::empty && slots_[s].layer == static_cast<std::int64_t>(layer))
      return static_cast<int>(s);
  return -1;
}

int StreamedTrunk::claimable(std::size_t layer, std::span<const std::size_t> next) const {
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].state == SlotState::empty) return static_cast<int>(s);
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    const Slot& slot = slots_[s];
    if (slot.state != SlotState::ready || slot.held) continue;
    const auto li = static_cast<std::size_t>(slot.layer);
    if (li != layer && std::find(next.begin(), next.end(), li) == next.end()) return static_cast<int>(s);
  }
  return -1;
}

void StreamedTrunk::start_read(int s, std::size_t layer) {
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  slot.layer = static_cast<std::int64_t>(layer);
  slot.state = SlotState::loading;
  slot.error = nullptr;
  reader_.push({s, layer});
}

void StreamedTrunk::read_ahead(std::size_t layer) {
  const std::span<const std::size_t> next = upcoming(layer);
  for (std::size_t li : next) {
    if (slot_of(li) >= 0) continue;
    const int s = claimable(layer, next);
    if (s < 0) return;
    start_read(s, li);
  }
}

const maths::LayerWeights& StreamedTrunk::acquire_layer(std::size_t layer) {
  if (!ours_[layer]) throw RuntimeError("layer " + std::to_string(layer) + " is held by another rank");
  if (pinned_[layer]) return pinned_layers_[layer];
  Slot& slot = hold_slot(layer);
  // The router lookahead's copy of this layer's router, made the first time the layer is
  // read (the first pass), from the slot's exact router: no read of its own, no I/O wait.
  if (maths::RouterCopy* copy = router_copies_[layer].get(); copy != nullptr && !copy->filled())
    copy->assign(slot.w.moe.gate, slot.w.moe.bias.data());
  return slot.w;
}

StreamedTrunk::Slot& StreamedTrunk::hold_slot(std::size_t layer) {
  auto lk = reader_.lock();
  ScopedTimer wait(counters_.io_wait_ns);
  int s = slot_of(layer);
  while (s < 0) {  // not read ahead (first pass, or an unusual walk): read it now
    int free = claimable(layer, upcoming(layer));
    for (std::size_t k = 0; free < 0 && k < slots_.size(); ++k)  // the walk jumped: any idle slot
      if (slots_[k].state == SlotState::ready && !slots_[k].held) free = static_cast<int>(k);
    if (free >= 0) {
      start_read(free, layer);
      s = free;
    } else {
      reader_.wait(lk);  // every slot is being filled: wait for one
      s = slot_of(layer);
    }
  }
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  reader_.wait(lk, [&] { return slot.state == SlotState::ready; });
  if (slot.error) {
    slot.state = SlotState::empty;
    slot.layer = -1;
    std::rethrow_exception(std::exchange(slot.error, nullptr));
  }
  slot.held = true;
  held_ = s;
  read_ahead(layer);
  return slot;
}

const maths::RouterCopy* StreamedTrunk::router_copy(std::size_t layer) {
  if (layer >= router_copies_.size()) return nullptr;
  const maths::RouterCopy* copy = router_copies_[layer].get();
  return copy != nullptr && copy->filled() ? copy : nullptr;
}

const maths::MoeWeights* StreamedTrunk::router_at_hand(std::size_t layer) {
  if (layer >= pinned_.size() || !ours_[layer]) return nullptr;
  if (pinned_[layer]) return pinned_layers_[layer].dense ? nullptr : &pinned_layers_[layer].moe;
  const auto lk = reader_.lock();
  const int s = slot_of(layer);
  if (s < 0) return nullptr;
  const Slot& slot = slots_[static_cast<std::size_t>(s)];
  if (slot.state != SlotState::ready || slot.error || slot.w.dense) return nullptr;
  return &slot.w.moe;
}

void StreamedTrunk::release_layer(std::size_t layer) {
  if (pinned_[layer]) return;
  auto lk = reader_.lock();
  if (held_ >= 0) slots_[static_cast<std::size_t>(held_)].held = false;
  held_ = -1;
  read_ahead(layer);
}

void StreamedTrunk::embed(std::span<const std::uint32_t> tokens, std::size_t E, float* P) {
  // One read per token row, issued as one batch in offset order.
  const std::uint64_t row_bytes = E * element_size(embed_info_->dtype);
  rows_.resize(tokens.size() * row_bytes);
  row_reads_.resize(tokens.size());
  row_order_.resize(tokens.size());
  std::vector<sdk::ReadRequest>& batch = row_reads_;
  std::vector<std::size_t>& order = row_order_;
  for (std::size_t t = 0; t < tokens.size(); ++t) order[t] = t;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return tokens[a] < tokens[b]; });
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t t = order[i];
    batch[i] = {embed_src_.offset + std::uint64_t{tokens[t]} * row_bytes, row_bytes, rows_.data() + t * row_bytes,
                sdk::StatusCode::ok};
  }
  sdk::Status st;
  {
    ScopedTimer io(counters_.io_wait_ns);
    ScopedTimer rd(counters_.read_ns);
    st = streaming::read_with_retry(*embed_src_.file, batch);
  }
  if (!st.ok())
    io::throw_read_failure(st.code, embed_src_.file_name + ": reading embedding rows of '" + embed_info_->name +
                                        "' failed: " + st.detail);
  counters_.table_bytes += tokens.size() * row_bytes;
  if (embed_src_.check != nullptr) {  // rows of a packed trunk, each against its own checksum
    ScopedTimer v(counters_.verify_ns);
    for (std::size_t t = 0; t < tokens.size(); ++t)
      embed_src_.check->rows_at(rows_.data() + t * row_bytes, tokens[t], 1);
  }
  // The fetched rows as a [tokens, E] matrix of the table's dtype, widened exactly.
  const maths::Matrix rows{rows_.data(), tokens.size(), E, embed_info_->dtype == DType::f32};
  for (std::size_t t = 0; t < tokens.size(); ++t) rows.row(t, P + t * E);
}

void StreamedTrunk::head(const maths::Ops& ops, const float* x, std::size_t n, float* logits) {
  if (head_chunk_rows_ == 0)
    ops.matmul(global_.lm_head, x, n, logits);
  else
    row_chunks_->matmul(ops, head_where_, x, n, logits, true);
}

}  // namespace k3::streaming
