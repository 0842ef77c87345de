#!/bin/sh
# Regenerates sdk/abi.lock: "K3_PLUGIN_ABI=<n> sha256=<hash>", where <hash> is the SHA-256 of
# every sdk/k3/*.hpp concatenated in byte order of their names. The ctest test
# "sdk: abi.lock ..." recomputes both and fails when the headers changed without this
# script being run — the moment to decide whether K3_PLUGIN_ABI must be bumped
# (docs/plugins.md, "ABI rules").
#
#   tools/sdk-abi-lock.sh          rewrite sdk/abi.lock
#   tools/sdk-abi-lock.sh --print  print the line instead (the test compares it)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
abi=$(sed -n 's/^#define K3_PLUGIN_ABI \([0-9][0-9]*\)u\{0,1\}[[:space:]]*$/\1/p' "$root/sdk/k3/abi.hpp")
if [ -z "$abi" ]; then
  echo "sdk-abi-lock: cannot read '#define K3_PLUGIN_ABI <n>' from $root/sdk/k3/abi.hpp" >&2
  exit 2
fi
hash=$(cd "$root/sdk/k3" && find . -maxdepth 1 -name '*.hpp' -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -d' ' -f1)
line="K3_PLUGIN_ABI=$abi sha256=$hash"
if [ "${1:-}" = "--print" ]; then
  echo "$line"
  exit 0
fi
tmp="$root/sdk/abi.lock.tmp.$$"
echo "$line" > "$tmp"
mv "$tmp" "$root/sdk/abi.lock"
echo "sdk/abi.lock: $line"
