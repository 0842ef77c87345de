// XXH3 at the widest vector set this CPU runs. libxxhash's plain XXH3_64bits is built for
// the baseline ISA (SSE2 on x86-64: ~9 GB/s here); its x86 dispatch entry points pick AVX2
// or AVX-512 at run time (~30 GB/s on data in cache). The hash is the same bits either way:
// only its speed differs, which matters where every byte read is checked (the packed
// trunk's reads, the checkpoint identity). Include this instead of <xxhash.h> there.
#pragma once
#include <xxhash.h>

#if (defined(__x86_64__) || defined(__i386__)) && __has_include(<xxh_x86dispatch.h>)
#include <xxh_x86dispatch.h>  // redefines XXH3_64bits, XXH3_64bits_update, ... as the dispatching ones
#endif
