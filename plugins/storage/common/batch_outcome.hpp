// Shared by the local storage backends: how a batch reports its requests' outcomes (the
// StorageFile::read contract: every request gets its own result, the call returns the
// first failure in batch order, or success).
#pragma once
#include <span>
#include <utility>
#include <vector>

#include <k3/status.hpp>
#include <k3/storage.hpp>

namespace k3::storage::local {

/// Copies results[i] into batch[i].result; returns the first failure.
inline k3::sdk::Status settle(std::span<k3::sdk::ReadRequest> batch, std::vector<k3::sdk::Status>& results) {
  k3::sdk::Status first_failure;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].result = results[i].code;
    if (!results[i].ok() && first_failure.ok()) first_failure = std::move(results[i]);
  }
  return first_failure;
}

/// Reads the requests one after another with `read_one(request) -> Status`; records each
/// outcome and returns the first failure.
template <class ReadOne>
k3::sdk::Status read_each(std::span<k3::sdk::ReadRequest> batch, ReadOne&& read_one) {
  k3::sdk::Status first_failure;
  for (auto& request : batch) {
    k3::sdk::Status st = read_one(request);
    request.result = st.code;
    if (!st.ok() && first_failure.ok()) first_failure = std::move(st);
  }
  return first_failure;
}

}  // namespace k3::storage::local
