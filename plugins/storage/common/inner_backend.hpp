// For decorators (throttle, faulty, tiered): the `inner` parameter names the wrapped backend
// and every `inner.<key>=<value>` is forwarded to it as `<key>=<value>` (ParamReader::
// forwarded). The inner backend is created through HostServices::create_storage, which
// refuses keys the inner backend does not know.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <k3/host.hpp>
#include <k3/params.hpp>
#include <k3/status.hpp>
#include <k3/storage.hpp>

namespace k3::storage::local {

/// The two table entries every decorator has: which backend it wraps (default
/// `default_name`), and the keys forwarded to it.
constexpr k3::sdk::ParamDescriptor inner_name(const char* default_name) {
  return sdk::param::string("inner", default_name,
                            "the wrapped storage backend (any storage plugin, decorators included)");
}
inline constexpr k3::sdk::ParamDescriptor kInnerKeys = sdk::param::storage_params(
    "inner.*", "the inner backend's parameters, forwarded without the prefix (inner.inner.x goes two levels down)");

/// Creates the inner backend `name` with `forwarded` (ParamReader::forwarded("inner.")).
inline sdk::Status create_inner(sdk::HostServices* host, const std::string& decorator, const std::string& name,
                                const std::vector<sdk::Param>& forwarded, std::unique_ptr<sdk::StorageBackend>& out) {
  if (host == nullptr)
    return sdk::Status::error(sdk::StatusCode::internal,
                              decorator + ": the host gave no services to create '" + name + "'");
  sdk::Status st = host->create_storage(name, forwarded, out);
  if (!st.ok()) st.detail = decorator + ": inner backend '" + name + "': " + st.detail;
  return st;
}

/// The inner backend a decorator's parameters name: `inner` and the `inner.*` keys, read
/// with the decorator's other parameters (before ParamReader::unused()), and created once
/// those are checked.
class InnerBackend {
 public:
  explicit InnerBackend(sdk::ParamReader& params)
      : name_(params.get_string("inner")), forwarded_(params.forwarded("inner.")) {}

  /// create_inner for the decorator `decorator`.
  sdk::Status create(sdk::HostServices* host, const std::string& decorator,
                     std::unique_ptr<sdk::StorageBackend>& out) const {
    return create_inner(host, decorator, name_, forwarded_, out);
  }

 private:
  std::string name_;
  std::vector<sdk::Param> forwarded_;
};

}  // namespace k3::storage::local
