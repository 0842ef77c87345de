#!/bin/sh
# Routing traces of the trained demo model (data/models/fortune, docs/demo-model.md) on text
# it never saw, replayed through every cache policy beside Belady; then the calibrated
# synthetic generator's settings (configs/traces/k3-calibrated.yaml, incremental decode) on
# the same geometry and token count, for comparison (docs/cache.md, "Traces of a trained
# model"). Not a ctest test.
#
#   tools/bench/fortune_traces.sh [K3HOST] [WORKDIR] [BYTES]
#     defaults: the repository's build/bin/k3host, bench/fortune_traces in its build folder,
#     7000 (the first BYTES of data/text/heldout.txt)
#
# The text is fed one token per forward pass (job.prefill_chunk=1), so every token is its
# own serving group, as in decode: teacher forcing on real text instead of the model's own
# continuation, which would drift into repetition.
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -le 3 ] || { echo "usage: tools/bench/fortune_traces.sh [K3HOST] [WORKDIR] [BYTES]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
K3HOST=${1:-$here/build/bin/k3host}
[ -x "$K3HOST" ] || { echo "fortune_traces.sh: no k3host at '$K3HOST'" >&2; exit 2; }
WORK=${2:-$(cd "$(dirname "$K3HOST")/.." && pwd)/bench/fortune_traces}
BYTES=${3:-7000}
mkdir -p "$WORK"
head -c "$BYTES" "$here/data/text/heldout.txt" > "$WORK/fortune-heldout.txt"
"$K3HOST" --config "$here/presets/laptop.yaml" -m "$here/data/models/fortune" -f "$WORK/fortune-heldout.txt" \
  -n 1 --set job.prefill_chunk=1 --set "trace.out=$WORK/fortune-heldout.k3trace" --out "$WORK/fortune-run.json" -q >/dev/null
echo "== trained model, held-out text ($BYTES bytes)"
"$K3HOST" sim "$WORK/fortune-heldout.k3trace" --capacity 0.5x,1x,2x,4x,8x --json "$WORK/fortune-heldout-sim.json"
tokens=$(/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(len(r['prompt_ids']))" "$WORK/fortune-run.json")
"$K3HOST" sim --generate-trace "$WORK/fortune-synthetic.k3trace" --trace-preset "$here/configs/traces/k3-calibrated.yaml" \
  --layers 7 --experts 64 --top-k 4 --tokens "$tokens" --recompute-prompt 0 >/dev/null
echo "== calibrated synthetic settings, same geometry and $tokens tokens"
"$K3HOST" sim "$WORK/fortune-synthetic.k3trace" --capacity 0.5x,1x,2x,4x,8x --json "$WORK/fortune-synthetic-sim.json"
