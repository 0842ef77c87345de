#!/bin/bash
# k3's kernels against two builds of ggml's CPU backend (docs/benchmarks-log.md, "Kernel
# sets"): ggml as this project first measured it (LLAMAFILE off, weights in ggml's plain
# layout) and ggml as llama.cpp builds and uses it (LLAMAFILE on, so bf16 and fp32 batches
# of 2 or more go to tinyBLAS; weights in the CPU_REPACK buffer type where ggml has a
# repacked layout for the type on this CPU). Both from one ggml checkout, built out of tree
# (ggml is never vendored here), and run alternately on one pinned CPU: plain, llama.cpp,
# plain, llama.cpp, ... One k3bench-ggml serves both: the build folder's, configured with
# K3_GGML_DIR at the first install; each run picks its ggml's libraries with
# LD_LIBRARY_PATH (the same headers and ABI: one checkout), and prints which ggml it loaded
# (commit, LLAMAFILE, CPU_REPACK) above its table, so a wrong pick shows. Its k3 / ggml
# ratios come from that one run (k3 and ggml alternate inside it). Not a ctest test.
#
# The two ggml builds differ only in GGML_LLAMAFILE (llama.cpp's default is ON, ggml's own
# OFF); both have ggml's defaults GGML_CPU_REPACK=ON and GGML_NATIVE=ON, spelled out below.
# GGML_OPENMP is off in both (llama.cpp's default is on; with one thread it only adds a
# parallel region per graph).
#
#   tools/bench/ggml_builds.sh --ggml SRC [options] [-- ARGS]
#     --ggml SRC        a ggml checkout (github.com/ggml-org/ggml) outside this repository (required)
#     --work DIR        ggml's two builds and installs (default: bench/ggml in the build folder)
#     --build DIR       the repository's build folder, where k3bench-ggml is built (default: build)
#     --cpu N           pin every run to this CPU (default 1)
#     --passes N        alternations of the two builds (default 2)
#     -- ARGS           k3bench-ggml arguments for both (default: --set avx2 --kernels
#                       bf16,f32,mxfp4 --positions 8 --rounds 5 --min-time 0.4 --working-set 256)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
SRC=""
BUILD=$REPO/build
WORK=""
CPU=1
PASSES=2
# shellcheck disable=SC2054  # the commas are one argument of k3bench-ggml
ARGS=(--set avx2 --kernels bf16,f32,mxfp4 --positions 8 --rounds 5 --min-time 0.4 --working-set 256)
while [ $# -gt 0 ]; do
  case "$1" in
    --ggml) SRC=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --cpu) CPU=$2; shift 2 ;;
    --passes) PASSES=$2; shift 2 ;;
    --) shift; ARGS=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "ggml_builds.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$SRC" ] || { echo "ggml_builds.sh: --ggml SRC (a ggml checkout) is required" >&2; exit 2; }
[ -f "$SRC/include/ggml.h" ] || { echo "ggml_builds.sh: $SRC/include/ggml.h not found: not a ggml checkout" >&2; exit 2; }
command -v taskset >/dev/null || { echo "ggml_builds.sh: taskset (util-linux) is needed" >&2; exit 2; }
WORK=${WORK:-$BUILD/bench/ggml}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

# The flags both builds share, then the one that differs.
GGML_COMMON=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CPU_REPACK=ON -DGGML_OPENMP=OFF
  -DBUILD_SHARED_LIBS=ON -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF)
declare -A LLAMAFILE=([plain]=OFF [llamacpp]=ON)
declare -A WEIGHTS=([plain]=plain [llamacpp]=repack)

[ -f "$BUILD/CMakeCache.txt" ] || { echo "ggml_builds.sh: $BUILD is not a configured build folder" >&2; exit 2; }
for side in plain llamacpp; do
  echo "# building ggml ($side: GGML_LLAMAFILE=${LLAMAFILE[$side]}) in $WORK/$side" >&2
  cmake -S "$SRC" -B "$WORK/$side/ggml-build" "${GGML_COMMON[@]}" -DGGML_LLAMAFILE="${LLAMAFILE[$side]}" >/dev/null
  cmake --build "$WORK/$side/ggml-build" >/dev/null
  cmake --install "$WORK/$side/ggml-build" --prefix "$WORK/$side/ggml" >/dev/null
done
echo "# building k3bench-ggml in $BUILD" >&2
cmake -B "$BUILD" -DK3_GGML_DIR="$WORK/plain/ggml" >/dev/null
cmake --build "$BUILD" --target k3bench-ggml >/dev/null

for pass in $(seq 1 "$PASSES"); do
  for side in plain llamacpp; do
    echo
    echo "## pass $pass/$PASSES, ggml $side, CPU $CPU: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
    LD_LIBRARY_PATH="$WORK/$side/ggml/lib:$WORK/$side/ggml/lib64" \
      taskset -c "$CPU" "$BUILD/bin/k3bench-ggml" "${ARGS[@]}" --ggml-weights "${WEIGHTS[$side]}"
    echo "(ended $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
  done
done
