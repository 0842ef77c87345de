"""Builds the demo model's text corpus from the English fortune files Debian ships.

Usage: /usr/bin/python3 tools/train/data.py OUT_DIR [--heldout-fraction 0.05] [--seed 1]

Reads every fortune text file of the installed packages (`fortunes`, `fortunes-min`; not the
`.dat` indexes nor the `.u8` links to the same files), splits it into fortunes at lines that
are a lone `%`, shuffles the fortunes with a fixed seed and writes OUT_DIR/train.txt and
OUT_DIR/heldout.txt (fortunes joined by a blank line) plus OUT_DIR/sources.json naming every
package, file, fortune count and the package's licence file. The packages' Debian copyright
files are copied next to the text (OUT_DIR/copyright-<package>) so the licence travels with it.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess

FORTUNE_DIR = "/usr/share/games/fortunes"
PACKAGES = ("fortunes", "fortunes-min")
# ascii-art is pictures, not English; a small model would spend capacity on it for nothing.
EXCLUDED = {"ascii-art"}


def package_files(pkg):
    """The fortune text files a package installed (dpkg's own list, so the source is exact)."""
    out = subprocess.run(["dpkg", "-L", pkg], check=True, capture_output=True, text=True).stdout
    files = []
    for path in out.split("\n"):
        if not path.startswith(FORTUNE_DIR + "/") or path.endswith(".dat") or path.endswith(".u8"):
            continue
        if os.path.isfile(path) and not os.path.islink(path) and os.path.basename(path) not in EXCLUDED:
            files.append(path)
    return sorted(files)


def package_version(pkg):
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], check=True, capture_output=True,
                          text=True).stdout


def split_fortunes(text):
    """Fortunes are separated by lines holding only '%'; blank fortunes are dropped."""
    items, cur = [], []
    for line in text.split("\n"):
        if line.strip() == "%":
            items.append("\n".join(cur).strip("\n"))
            cur = []
        else:
            cur.append(line.rstrip())
    items.append("\n".join(cur).strip("\n"))
    return [f for f in items if f.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--heldout-fraction", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    fortunes, sources = [], []
    for pkg in PACKAGES:
        for path in package_files(pkg):
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")   # the .u8 links promise UTF-8; fail loudly if not
            items = split_fortunes(text)
            fortunes += items
            sources.append({"package": pkg, "version": package_version(pkg), "file": path,
                            "fortunes": len(items), "licence": f"/usr/share/doc/{pkg}/copyright"})
    # Sort first so the shuffle does not depend on file-system order, then shuffle with a seed.
    fortunes.sort()
    random.Random(args.seed).shuffle(fortunes)
    n_held = max(1, round(len(fortunes) * args.heldout_fraction))
    held, train = fortunes[:n_held], fortunes[n_held:]
    os.makedirs(args.out, exist_ok=True)
    for pkg in PACKAGES:
        shutil.copyfile(f"/usr/share/doc/{pkg}/copyright", os.path.join(args.out, f"copyright-{pkg}"))
    summary = {"seed": args.seed, "heldout_fraction": args.heldout_fraction, "sources": sources}
    for name, items in (("train.txt", train), ("heldout.txt", held)):
        data = ("\n\n".join(items) + "\n").encode("utf-8")
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(data)
        summary[name] = {"fortunes": len(items), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    with open(os.path.join(args.out, "sources.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({k: summary[k] for k in ("train.txt", "heldout.txt")}))


if __name__ == "__main__":
    main()
