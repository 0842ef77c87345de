// k3host plugin SDK: the registration macros. \since ABI 1 (K3_PLUGIN_PARAMS: ABI 3)
//
//   K3_PLUGIN(kind, "name", "version", factory, score)
//   K3_PLUGIN_PARAMS(table)     the parameters the factory accepts (params.hpp), or
//   K3_PLUGIN_NO_PARAMS()       when it accepts none
//
// kind     storage | cache | kernels | tokenizer | transport (a token, not a string)
// factory  a function  k3::sdk::Status factory(const k3::sdk::CreateArgs& args,
//                                               std::unique_ptr<Interface>& out,
//                                               std::vector<std::string>& unknown_params);
//          Interface is StorageBackend, CachePolicy, KernelSet, Tokenizer or Transport. It fills `out`
//          and lists the parameter keys it did not read (ParamReader::unused()).
// table    a C array of k3::sdk::ParamDescriptor (abi.hpp), the same one the factory hands its
//          ParamReader, so the description cannot drift from the code.
// score    int(*)(void) or nullptr; kernels: 0 = cannot run here. Must execute no ISA code
//          beyond the baseline (compile it in a TU built with baseline flags).
//
// K3_PLUGIN exports exactly `k3_plugin_descriptor` and `k3_plugin_create`, and
// K3_PLUGIN_PARAMS / K3_PLUGIN_NO_PARAMS `k3_plugin_params`, through BOOST_DLL_ALIAS; build
// plugins with -fvisibility=hidden (k3_add_plugin does). The parameter table is optional
// for the host: a plugin without one is listed as "does not describe its parameters", and
// only its factory's unused() keys are refused.
// Exceptions thrown by the factory are caught and returned as StatusCode::internal.
// The macros' own names (k3_descriptor_entry, k3_factory_entry, k3_params_entry) cannot
// collide with a factory called `create` in the plugin's namespace.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <boost/dll/alias.hpp>

#include <k3/abi.hpp>
#include <k3/cache_policy.hpp>
#include <k3/host.hpp>
#include <k3/kernels.hpp>
#include <k3/params.hpp>
#include <k3/status.hpp>
#include <k3/storage.hpp>
#include <k3/tokenizer.hpp>
#include <k3/transport.hpp>

namespace k3::sdk {

template <class Interface>
using Factory = Status(const CreateArgs& args, std::unique_ptr<Interface>& out,
                       std::vector<std::string>& unknown_params);

namespace kind {
struct storage {
  using Interface = StorageBackend;
  static constexpr const char* name = "storage";
};
struct cache {
  using Interface = CachePolicy;
  static constexpr const char* name = "cache";
};
struct kernels {
  using Interface = KernelSet;
  static constexpr const char* name = "kernels";
};
struct tokenizer {
  using Interface = Tokenizer;
  static constexpr const char* name = "tokenizer";
};
struct transport {
  using Interface = Transport;
  static constexpr const char* name = "transport";
};
}  // namespace kind

namespace detail {
template <class Kind, Factory<typename Kind::Interface>* Make>
Status guarded_create(const CreateArgs& args, std::unique_ptr<typename Kind::Interface>& out,
                      std::vector<std::string>& unknown_params) {
  try {
    return Make(args, out, unknown_params);
  } catch (const std::exception& e) {
    return Status::error(StatusCode::internal, e.what());
  } catch (...) {
    return Status::error(StatusCode::internal, "unknown exception in plugin factory");
  }
}
}  // namespace detail

}  // namespace k3::sdk

#define K3_PLUGIN(KIND, NAME, VERSION, FACTORY, SCORE)                                                   \
  namespace k3_plugin_export {                                                                           \
  const K3PluginDescriptor k3_descriptor_entry = {K3_PLUGIN_ABI, ::k3::sdk::kind::KIND::name,            \
                                                  NAME,          VERSION,                                \
                                                  K3_TOOLCHAIN,  SCORE};                                 \
  ::k3::sdk::Status k3_factory_entry(const ::k3::sdk::CreateArgs& args,                                  \
                                     std::unique_ptr<::k3::sdk::kind::KIND::Interface>& out,             \
                                     std::vector<std::string>& unknown_params) {                         \
    return ::k3::sdk::detail::guarded_create<::k3::sdk::kind::KIND, FACTORY>(args, out, unknown_params); \
  }                                                                                                      \
  }                                                                                                      \
  BOOST_DLL_ALIAS(k3_plugin_export::k3_descriptor_entry, k3_plugin_descriptor)                           \
  BOOST_DLL_ALIAS(k3_plugin_export::k3_factory_entry, k3_plugin_create)

#define K3_PLUGIN_PARAMS(TABLE)                                                                                     \
  namespace k3_plugin_export {                                                                                      \
  const K3PluginParams k3_params_entry = {static_cast<std::uint32_t>(sizeof(TABLE) / sizeof((TABLE)[0])), (TABLE)}; \
  }                                                                                                                 \
  BOOST_DLL_ALIAS(k3_plugin_export::k3_params_entry, k3_plugin_params)

#define K3_PLUGIN_NO_PARAMS()                          \
  namespace k3_plugin_export {                         \
  const K3PluginParams k3_params_entry = {0, nullptr}; \
  }                                                    \
  BOOST_DLL_ALIAS(k3_plugin_export::k3_params_entry, k3_plugin_params)
