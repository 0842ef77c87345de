#!/usr/bin/env bash
# ctest driver for the tokenizer parity test (tests/cmake/tokenizer_parity.cmake).
# Usage: run_parity.sh K3HOST WORKDIR
# Exit 77 (ctest SKIP) with the reason when node or the npm packages are missing: install
# them with tools/install-deps.sh --with-npm. Never passes without comparing.
set -euo pipefail
here="$(cd "${0%/*}" && pwd)"
k3host="$1"
work="$2"
if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed (tools/install-deps.sh --with-npm)"
  exit 77
fi
for pkg in tiktoken js-tiktoken; do
  if [[ ! -f "$here/node_modules/$pkg/package.json" ]]; then
    echo "SKIP: npm package $pkg missing in $here/node_modules (tools/install-deps.sh --with-npm)"
    exit 77
  fi
done
if ! node -e 'new RegExp("[\\p{L}&&\\p{Lu}]", "v")' 2>/dev/null; then
  echo "SKIP: this node ($(node --version)) has no Unicode-sets regex (/v); Node 20 or later is needed"
  exit 77
fi
exec node "$here/parity.cjs" "$k3host" "$work" "$here/corpus"
