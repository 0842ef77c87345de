// k3host plugin SDK: the ABI number, the plugin descriptor and the parameter descriptions.
//
// Every plugin library exports two symbols (made by K3_PLUGIN in plugin.hpp), and a third
// when it describes its parameters (K3_PLUGIN_PARAMS or K3_PLUGIN_NO_PARAMS):
//   k3_plugin_descriptor  a K3PluginDescriptor (plain C data, `abi` first)
//   k3_plugin_create      the factory for the kind named in the descriptor
//   k3_plugin_params      a K3PluginParams: every parameter the factory accepts (optional)
// The host reads the descriptor first and refuses the library, naming the file, unless
// abi == K3_PLUGIN_ABI and toolchain matches its own: our interfaces are C++ vtables, so
// the compiler and standard-library ABI must agree too. The parameter table is plain data
// too: the host reads it without creating a plugin object (`k3host plugins --params`, and
// to check a pipeline's parameters before the factory runs).
//
// Bump K3_PLUGIN_ABI on any change under sdk/ that alters a layout, a vtable or documented
// behaviour, and update sdk/abi.lock (tools/sdk-abi-lock.sh); a test checks the two agree.
// History: 1 the first SDK; 2 StorageBackend::list and HostServices::read_file;
// 3 k3_plugin_params (K3ParamDescriptor), and ParamReader reads through that table.
// Within 3, additive and optional (no bump: a plugin built without it loads and works as
// before), each found by dynamic_cast: CachePrefetchListener (cache_prefetch.hpp).
// 4 HostServices::stop_requested, StatusCode::timed_out and ::interrupted (not retried by
// the host), shard names of an http(s) model.path percent-encoded in their URIs;
//   and the parameter description is k3::sdk::ParamDescriptor (was the global
//   K3ParamDescriptor; the same layout): everything a plugin names is in the SDK's namespace.
// Within 4, additive and optional likewise: StorageFileVersion and StorageCounters
// (storage_extras.hpp).
// 5 a fifth kind, transport (transport.hpp): how the ranks of a pipeline split over
//   processes or machines reach each other (docs/cluster.md).
#pragma once
#include <cstdint>

#define K3_PLUGIN_ABI 6u

#if defined(__clang__)
#define K3_TOOLCHAIN_COMPILER "clang"
#elif defined(__GNUC__)
#define K3_TOOLCHAIN_COMPILER "gcc"
#else
#define K3_TOOLCHAIN_COMPILER "cc"
#endif
#if defined(_GLIBCXX_USE_CXX11_ABI) && _GLIBCXX_USE_CXX11_ABI
#define K3_TOOLCHAIN_STDLIB "libstdc++-cxx11"
#elif defined(_LIBCPP_VERSION)
#define K3_TOOLCHAIN_STDLIB "libc++"
#else
#define K3_TOOLCHAIN_STDLIB "libstdc++-old"
#endif
/// Compiler family + C++ standard-library ABI tag. Must match the host's exactly.
#define K3_TOOLCHAIN K3_TOOLCHAIN_COMPILER "/" K3_TOOLCHAIN_STDLIB

extern "C" {
/// The descriptor every plugin exports as `k3_plugin_descriptor`. \since ABI 1
struct K3PluginDescriptor {
  std::uint32_t abi;      ///< K3_PLUGIN_ABI the plugin was built with. Must stay first.
  const char* kind;       ///< "storage", "cache", "kernels", "tokenizer" or "transport" (ABI 5)
  const char* name;       ///< unique plugin name, e.g. "posix"
  const char* version;    ///< the plugin's own version, MAJOR.MINOR.PATCH ("1.0.0")
  const char* toolchain;  ///< K3_TOOLCHAIN when built
  int (*score)(void);     ///< kernels: 0 = cannot run on this CPU, higher = preferred.
                          ///< Others: may be null (treated as 1). Must run no ISA code.
};

/// The type of a described parameter; params.hpp says which text each one accepts. \since ABI 3
enum K3ParamType : std::uint32_t {
  K3_PARAM_STRING = 1,   ///< any text
  K3_PARAM_INTEGER = 2,  ///< decimal integer, within `allowed` (an interval)
  K3_PARAM_NUMBER = 3,   ///< finite decimal number, within `allowed` (an interval)
  K3_PARAM_BOOL = 4,     ///< true/false (also yes/no, on/off, 1/0)
  K3_PARAM_ENUM = 5,     ///< one of `allowed` ("none|buffered"; "regex:*" = any text after "regex:")
  K3_PARAM_PATH = 6,     ///< a file, folder or URI, as the plugin reads it (pipelines tag it !path)
};

/// ParamDescriptor::flags.
#define K3_PARAM_REQUIRED 1u  ///< creation fails without it (an empty value counts as absent)
/// On a family "p.*" only: its keys are the parameters of the storage plugin that the string
/// parameter `p` names (a decorator's inner.*), so the host checks them against that plugin.
#define K3_PARAM_STORAGE_PARAMS 2u
}  // extern "C"

namespace k3::sdk {
/// One parameter a plugin accepts. Every string is static, NUL-terminated, and stays valid
/// while the library is loaded. \since ABI 3 (as the global K3ParamDescriptor until ABI 4)
struct ParamDescriptor {
  const char* key;            ///< "queue_depth"; "inner.*" stands for every key starting "inner."
  std::uint32_t type;         ///< a K3ParamType
  const char* default_value;  ///< as a pipeline writes it ("32", "false", "none", "" = empty);
                              ///< nullptr: no default (required, or `meaning` says what absence does)
  const char* allowed;        ///< integer/number: an interval "[1, 4096]", "(0, 1]", "[0, )";
                              ///< enum: the choices, '|'-separated; others: nullptr
  const char* meaning;        ///< one line: what it does, with units
  std::uint32_t flags;        ///< K3_PARAM_REQUIRED, K3_PARAM_STORAGE_PARAMS, or 0
};
}  // namespace k3::sdk

extern "C" {
/// What `k3_plugin_params` points at: the plugin's parameter table. \since ABI 3
struct K3PluginParams {
  std::uint32_t count;                    ///< entries in `items` (0: the plugin takes no parameters)
  const k3::sdk::ParamDescriptor* items;  ///< nullptr when count is 0
};
}
