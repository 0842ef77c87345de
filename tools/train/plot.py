"""Plots train.py's loss.csv: raw and smoothed training loss and the held-out loss, per token seen.

Usage: /usr/bin/python3 tools/train/plot.py RUN/loss.csv OUT.png [--title TEXT]
"""

import argparse
import csv

import matplotlib

matplotlib.use("Agg")   # no display: write the file only
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="fortune demo model: loss (nats/token)")
    ap.add_argument("--smooth", type=int, default=25, help="steps in the running mean")
    args = ap.parse_args()
    with open(args.csv) as f:
        rows = list(csv.DictReader(f))
    tok = [int(r["tokens"]) / 1e6 for r in rows]
    train = [float(r["train_loss"]) for r in rows]
    smooth = [sum(train[max(0, i - args.smooth + 1):i + 1]) / len(train[max(0, i - args.smooth + 1):i + 1])
              for i in range(len(train))]
    held = [(int(r["tokens"]) / 1e6, float(r["heldout_loss"])) for r in rows if r["heldout_loss"]]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot(tok, train, color="tab:blue", alpha=0.25, linewidth=0.8, label="train (per step)")
    ax.plot(tok, smooth, color="tab:blue", label=f"train ({args.smooth}-step mean)")
    ax.plot([h[0] for h in held], [h[1] for h in held], "o-", color="tab:red", label="held-out")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_ylim(bottom=min(train + [h[1] for h in held]) - 0.3, top=min(9.0, max(train) + 0.2))
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(args.title)
    fig.tight_layout()
    fig.savefig(args.png)


if __name__ == "__main__":
    main()
