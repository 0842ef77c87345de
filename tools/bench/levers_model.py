#!/usr/bin/env python3
"""Full K3 at `laptop` with the levers on: predicted s/token at several disk speeds
(docs/benchmarks-log.md, "Every lever at full scale"). Not a measurement: it combines the
measured figures below, each from its own benchmark, by the streaming design's rule.

Inputs (defaults: the measured figures, docs/benchmarks-log.md):
  --trunk-gb 108.81      trunk read per token, uncoded ("Full K3 geometry")
  --experts-gb 25.81     routed experts read per token, lookahead off ("At K3's full geometry",
                         docs/cache.md)
  --lookahead-gb 29.34   the same with the lookahead capped at 4 experts a layer
                         (cache.prefetch.mb_per_token=6460)
  --compute-s 21.6       the compute of one token on this VM's 2 vCPUs, wall seconds with 2 threads
  --cores 2              the cores the compute and the codec's decoding share
  --codec NAME:RATIO:GBPS  a trunk codec: its coded bytes ÷ raw and its decode rate (GB of
                         output per second of one core); repeatable; default the two measured
                         on full-size K3 layers ("The trunk codec on full-size K3 layers")
  --disk-gbs 2,4,7       the disk speeds

Rule (tools/bench/fullscale_table.py's, with the decoding added): reads overlap the compute,
so s/token = max(bytes / disk, CPU), where CPU = (compute x cores + trunk / decode rate) /
cores: the decoding runs on the reader threads, on the same cores as the compute. The
lookahead only moves reads earlier. This rule already assumes every read overlaps the
compute, so the lookahead can only add its extra bytes here. What it does in a real run is
measured in docs/cache.md.
"""
import argparse


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trunk-gb", type=float, default=108.81)
    ap.add_argument("--experts-gb", type=float, default=25.81)
    ap.add_argument("--lookahead-gb", type=float, default=29.34)
    ap.add_argument("--compute-s", type=float, default=21.6)
    ap.add_argument("--cores", type=float, default=2)
    ap.add_argument("--codec", action="append", default=[])
    ap.add_argument("--disk-gbs", default="2,4,7")
    a = ap.parse_args()
    codecs = a.codec or ["bf16-huff:0.6456:1.70", "bf16-zstd:0.6106:1.43"]
    disks = [float(x) for x in a.disk_gbs.split(",")]

    rows = [("none", a.trunk_gb, a.experts_gb, 0.0),
            ("lookahead capped (4 experts a layer)", a.trunk_gb, a.lookahead_gb, 0.0)]
    for spec in codecs:
        name, ratio, rate = spec.split(":")
        ratio, rate = float(ratio), float(rate)
        decode = a.trunk_gb / rate  # core-seconds per token
        rows.append((f"trunk `{name}`", a.trunk_gb * ratio, a.experts_gb, decode))
        rows.append((f"trunk `{name}` + lookahead capped", a.trunk_gb * ratio, a.lookahead_gb, decode))

    print("| levers | read per token (GB) | CPU s/token | " +
          " | ".join(f"s/token at {d:g} GB/s" for d in disks) + " | cores for the CPU to keep up at " +
          " / ".join(f"{d:g}" for d in disks) + " GB/s |")
    print("|---|---:|---:|" + "---:|" * len(disks) + "---|")
    for name, trunk, experts, decode in rows:
        read = trunk + experts
        cpu = (a.compute_s * a.cores + decode) / a.cores
        times = [max(read / d, cpu) for d in disks]
        # Cores at which the CPU time equals the read time (the compute scaled with them).
        need = [(a.compute_s * a.cores + decode) / (read / d) for d in disks]
        print(f"| {name} | {read:.1f} | {cpu:.1f} | " + " | ".join(f"{t:.1f}" for t in times) + " | " +
              " / ".join(f"{n:.1f}" for n in need) + " |")
    print()
    print("Beside: the C99 reference engine 26.5 s/token at 8.7 GB on a 4.6 GB/s NVMe; colibri "
          "9.4 s/token (lossy trunk, 32 GB).")


if __name__ == "__main__":
    main()
