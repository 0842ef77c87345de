#!/bin/bash
# k3's kernels against two builds of ggml's CPU backend (docs/benchmarks-log.md, "Kernel
# sets"): ggml as this project first measured it (LLAMAFILE off, weights in ggml's plain
# layout) and ggml as llama.cpp builds and uses it (LLAMAFILE on, so bf16 and fp32 batches
# of 2 or more go to tinyBLAS; weights in the CPU_REPACK buffer type where ggml has a
# repacked layout for the type on this CPU). Both from one ggml checkout, built out of tree
# (ggml is never vendored here), each with its own k3bench-ggml, run alternately on one
# pinned CPU: plain, llama.cpp, plain, llama.cpp, ... Each run prints which ggml it loaded
# (commit, LLAMAFILE, CPU_REPACK) above its table, and its k3 / ggml ratios come from that
# one run (k3 and ggml alternate inside it). Not a ctest test.
#
# The two ggml builds differ only in GGML_LLAMAFILE (llama.cpp's default is ON, ggml's own
# OFF); both have ggml's defaults GGML_CPU_REPACK=ON and GGML_NATIVE=ON, spelled out below.
# GGML_OPENMP is off in both (llama.cpp's default is on; with one thread it only adds a
# parallel region per graph).
#
#   tools/bench/ggml_builds.sh --ggml SRC [options] [-- ARGS]
#     --ggml SRC        a ggml checkout (github.com/ggml-org/ggml) outside this repository (required)
#     --work DIR        ggml builds, installs and k3 builds (default: bench/ggml in the build folder)
#     --build DIR       the repository's build folder, for the default --work (default: build)
#     --cmake-arg A     one more argument for configuring k3's builds (repeatable), e.g. -DK3_UNITY_CORE=OFF
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
K3_ARGS=()
# shellcheck disable=SC2054  # the commas are one argument of k3bench-ggml
ARGS=(--set avx2 --kernels bf16,f32,mxfp4 --positions 8 --rounds 5 --min-time 0.4 --working-set 256)
while [ $# -gt 0 ]; do
  case "$1" in
    --ggml) SRC=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --cmake-arg) K3_ARGS+=("$2"); shift 2 ;;
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

for side in plain llamacpp; do
  echo "# building ggml ($side: GGML_LLAMAFILE=${LLAMAFILE[$side]}) and its k3bench-ggml in $WORK/$side" >&2
  cmake -S "$SRC" -B "$WORK/$side/ggml-build" "${GGML_COMMON[@]}" -DGGML_LLAMAFILE="${LLAMAFILE[$side]}" >/dev/null
  cmake --build "$WORK/$side/ggml-build" >/dev/null
  cmake --install "$WORK/$side/ggml-build" --prefix "$WORK/$side/ggml" >/dev/null
  cmake -S "$REPO" -B "$WORK/$side/k3-build" -G Ninja "${K3_ARGS[@]}" -DK3_GGML_DIR="$WORK/$side/ggml" >/dev/null
  cmake --build "$WORK/$side/k3-build" --target k3bench-ggml >/dev/null
done

for pass in $(seq 1 "$PASSES"); do
  for side in plain llamacpp; do
    echo
    echo "## pass $pass/$PASSES, ggml $side, CPU $CPU: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
    taskset -c "$CPU" "$WORK/$side/k3-build/bin/k3bench-ggml" "${ARGS[@]}" --ggml-weights "${WEIGHTS[$side]}"
    echo "(ended $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
  done
done
