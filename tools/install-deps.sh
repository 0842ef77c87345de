#!/usr/bin/env bash
# Installs exactly the Debian packages k3host needs, and only when something is missing.
# Usage: tools/install-deps.sh [--with-reference] [--with-npm] [--with-fuzz] [--with-train]
#   --with-reference  also the PyTorch oracle (python3-torch, numpy, OpenBLAS) for /usr/bin/python3
#   --with-npm        also the npm tokenizer oracle (tiktoken, js-tiktoken) into tests/oracle/node_modules
#                     and the OpenAI client (openai) into tests/serve/node_modules
#   --with-fuzz       also clang 14 with libFuzzer and its sanitizer runtimes, and LLVM's
#                     OpenMP, for the K3_FUZZ build (tests/fuzz, tools/fuzz.sh)
#   --with-train      also the demo model's recipe (tools/train): the English fortune texts it
#                     trains on, the regex module for the Kimi pre-tokenizer, matplotlib for
#                     the loss plot (plus what --with-reference installs)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build_pkgs=(cmake ninja-build g++ pkg-config libboost-dev libyaml-cpp-dev libcli11-dev
            libspdlog-dev libfmt-dev catch2 libpcre2-dev libsimdjson-dev liburing-dev
            libcurl4-openssl-dev libxxhash-dev libzstd-dev nlohmann-json3-dev nginx nodejs npm
            libedit-dev tmux
            clang-format-14  # the suite's format test (tools/format.sh --check)
            openmpi-bin libopenmpi-dev  # the mpi transport plugin and mpirun (docs/cluster.md)
            dpkg-dev file binutils  # cpack -G DEB: dpkg-shlibdeps (Depends), file, strip/readelf
            g++-aarch64-linux-gnu qemu-user)  # the neon kernel set's cross + qemu test
ref_pkgs=(python3-torch python3-numpy libopenblas0-pthread)
fuzz_pkgs=(clang-14 libclang-rt-14-dev libomp-14-dev)
train_pkgs=(fortunes fortunes-min python3-regex python3-matplotlib)
want=("${build_pkgs[@]}")
with_npm=0
for a in "$@"; do
  case "$a" in
    --with-reference) want+=("${ref_pkgs[@]}") ;;
    --with-npm) with_npm=1 ;;
    --with-fuzz) want+=("${fuzz_pkgs[@]}") ;;
    --with-train) want+=("${ref_pkgs[@]}" "${train_pkgs[@]}") ;;
    *) echo "install-deps: unknown option $a" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${want[@]}"; do
  # nodejs/npm may come from elsewhere (e.g. a preinstalled node); accept the commands.
  if [[ "$p" == nodejs ]] && command -v node >/dev/null; then continue; fi
  if [[ "$p" == npm ]] && command -v npm >/dev/null; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if printf '%s\n' "${missing[@]}" | grep -q python3-torch; then
    apt-get install -y -qq python3-torch >/dev/null   # with its recommends (BLAS)
  fi
fi
if ((with_npm)); then
  dir="$here/tests/oracle"
  if [[ ! -d "$dir/node_modules/tiktoken" || ! -d "$dir/node_modules/js-tiktoken" ]]; then
    echo "install-deps: npm install tiktoken js-tiktoken in $dir"
    (cd "$dir" && npm install --no-audit --no-fund --silent >/dev/null)
  fi
  dir="$here/tests/serve"   # the official OpenAI client, for the k3host serve tests
  if [[ ! -d "$dir/node_modules/openai" ]]; then
    echo "install-deps: npm install openai in $dir"
    (cd "$dir" && npm install --no-audit --no-fund --silent >/dev/null)
  fi
fi
