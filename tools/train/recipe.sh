#!/usr/bin/env bash
# The demo model end to end (docs/demo-model.md): corpus, tokenizer, training, export,
# perplexity float vs exported, loss plot. Usage: tools/train/recipe.sh WORK_DIR [--threads N] [--steps N] [--draft]
# WORK_DIR receives everything that is not committed (corpus, model.pt, the run's CSVs);
# the export goes to data/models/fortune and the figure to docs/figures/.
# --draft trains fortune's draft model instead (configs/models/fortune-draft.yaml, the same
# corpus, recipe and the committed fortune tokenizer) and exports it to data/models/fortune-draft
# (docs/speculative.md, "A draft model").
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
work="${1:?usage: recipe.sh WORK_DIR [--threads N] [--steps N]}"; shift
threads=1; steps=1100; draft=0
while (($#)); do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --draft) draft=1; shift ;;
    *) echo "recipe: unknown option $1" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3   # Debian's interpreter: python3-torch, numpy, regex, matplotlib
t="$here/tools/train"
"$py" "$t/data.py" "$work"
if ((draft)); then
  # fortune's own tokenizer files, so the draft model's ids are fortune's.
  cp "$here/data/models/fortune/tiktoken.model" "$here/data/models/fortune/tokenizer_config.json" "$work/"
  "$py" "$t/train.py" --data "$work" --out "$work/draft-run" --config "$here/configs/models/fortune-draft.yaml" \
    --steps "$steps" --threads "$threads" --eval-every 100 --batch 8 --seq 128 --lr 3e-3 --warmup 60 --seed 1
  "$py" "$t/export.py" "$work/draft-run/model.pt" "$work" "$here/data/models/fortune-draft" --shards 1
  cp "$work/draft-run/loss.csv" "$here/docs/figures/fortune-draft-loss.csv"
  exit 0
fi
"$py" "$t/tokenizer.py" "$work" --ranks 3072
"$py" "$t/train.py" --data "$work" --out "$work/run" --steps "$steps" --threads "$threads" \
  --eval-every 100 --batch 8 --seq 128 --lr 3e-3 --warmup 60 --seed 1
"$py" "$t/export.py" "$work/run/model.pt" "$work" "$here/data/models/fortune"
"$py" "$t/plot.py" "$work/run/loss.csv" "$here/docs/figures/fortune-loss.png"
cp "$work/run/loss.csv" "$here/docs/figures/fortune-loss.csv"
"$py" "$t/perplexity.py" "$work/heldout.txt" --float "$work/run/model.pt" --tokenizer "$work" --threads "$threads" --json
"$py" "$t/perplexity.py" "$work/heldout.txt" --checkpoint "$here/data/models/fortune" --threads "$threads" --json
