// k3host plugin SDK: the ABI number and the plugin descriptor.
//
// Every plugin library exports exactly two symbols (made by K3_PLUGIN in plugin.hpp):
//   k3_plugin_descriptor  a K3PluginDescriptor (plain C data, `abi` first)
//   k3_plugin_create      the factory for the kind named in the descriptor
// The host reads the descriptor first and refuses the library, naming the file, unless
// abi == K3_PLUGIN_ABI and toolchain matches its own: our interfaces are C++ vtables, so
// the compiler and standard-library ABI must agree too.
//
// Bump K3_PLUGIN_ABI on any change under sdk/ that alters a layout, a vtable or documented
// behaviour, and update sdk/abi.lock (tools/sdk-abi-lock.sh); a test checks the two agree.
// History: 1 the first SDK; 2 StorageBackend::list and HostServices::read_file.
#pragma once
#include <cstdint>

#define K3_PLUGIN_ABI 2u

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
  std::uint32_t abi;       ///< K3_PLUGIN_ABI the plugin was built with. Must stay first.
  const char* kind;        ///< "storage", "cache", "kernels" or "tokenizer"
  const char* name;        ///< unique plugin name, e.g. "posix"
  const char* version;     ///< the plugin's own version, free text
  const char* toolchain;   ///< K3_TOOLCHAIN when built
  int (*score)(void);      ///< kernels: 0 = cannot run on this CPU, higher = preferred.
                           ///< Others: may be null (treated as 1). Must run no ISA code.
};
}
