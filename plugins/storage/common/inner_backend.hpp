// For decorators (throttle, faulty): the `inner` parameter names the wrapped backend
// (default posix) and every `inner.<key>=<value>` is forwarded to it as `<key>=<value>`.
// The inner backend is created through HostServices::create_storage, which refuses keys
// the inner backend does not know.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <k3/host.hpp>
#include <k3/status.hpp>
#include <k3/storage.hpp>

namespace k3::storage::local {

inline constexpr std::string_view kInnerPrefix = "inner.";

/// True for keys the decorator forwards (so it does not report them as unknown).
inline bool is_inner_key(std::string_view key) noexcept { return key.starts_with(kInnerPrefix); }

/// Drops the forwarded keys from a ParamReader::unused() list.
inline std::vector<std::string> without_inner_keys(std::vector<std::string> keys) {
  std::erase_if(keys, [](const std::string& k) { return is_inner_key(k); });
  return keys;
}

/// Creates the inner backend `name` with the `inner.*` parameters of `params`.
inline sdk::Status create_inner(const sdk::CreateArgs& args, const std::string& decorator, const std::string& name,
                                std::unique_ptr<sdk::StorageBackend>& out) {
  if (args.host == nullptr)
    return sdk::Status::error(sdk::StatusCode::internal, decorator + ": the host gave no services to create '" + name + "'");
  std::vector<sdk::Param> forwarded;
  for (const auto& p : args.params)
    if (is_inner_key(p.key)) forwarded.push_back({p.key.substr(kInnerPrefix.size()), p.value});
  sdk::Status st = args.host->create_storage(name, forwarded, out);
  if (!st.ok()) st.detail = decorator + ": inner backend '" + name + "': " + st.detail;
  return st;
}

}  // namespace k3::storage::local
