#!/usr/bin/env python3
"""A model of a checkpoint split over machines (docs/cluster.md, "Full K3 on several machines").

For each machine count and memory size it asks `k3host plan --ranks N --json` (the planner the
ranks themselves run: cluster.layers auto, each rank's budgets fitted to --available-gb) what
each rank holds, what a decoded token makes it read from its own disk and send to the next
rank, and the weight bytes it multiplies. From those it predicts the s/token of one stream:

  per rank   max(bytes read / disk bandwidth, compute)   (reads overlap compute: the ring
             and the expert prefetch read ahead while a layer is multiplied)
  compute    --compute-s x (the rank's bytes multiplied / the whole model's) / --speedup
  network    per hop, bytes sent / link bandwidth + --latency-ms; the last rank's picks
             go back to rank 0
  one token  the sum over ranks and hops: one stream visits the stages one after another

Expert bytes read are the planner's expectation for uniform, independent routing (each
rank's cache hits with the chance slots / experts); real routing repeats experts, so this
reads more than a trained model would. Not a measurement: one point is checked against
real ranks in docs/cluster.md.

  tools/bench/cluster_model.py [--k3host build/bin/k3host] [--machines 4,8,16]
      [--ram-gb 32,64,128] [--disk-gbs 3,5,7] [--link-gbps 10] [--latency-ms 0.1]
      [--compute-s 21.6] [--speedup 1] [--config presets/auto.yaml] [--geometry k3]
"""
import argparse
import json
import subprocess
import sys


def plan(args, machines, ram):
    cmd = [args.k3host, "plan", "--config", args.config, "--set", f"model.geometry={args.geometry}",
           "--ranks", str(machines), "--available-gb", str(ram), "--json"] + args.set
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode not in (0, 3):  # 3: a rank's plan does not fit; the JSON says which
        sys.exit(f"cluster_model: {' '.join(cmd)}: exit {run.returncode}\n{run.stderr}")
    return json.loads(run.stdout)


def predict(ranks, disk_gbs, args, touched_total, with_compute=True):
    link = args.link_gbps / 8 * 1e9
    total = 0.0
    for r in ranks:
        read = r["trunk_bytes_read"] + r["expert_bytes_read"]
        compute = args.compute_s * r["bytes_touched"] / touched_total / args.speedup if with_compute else 0.0
        total += max(read / (disk_gbs * 1e9), compute)
        total += r["bytes_sent"] / link + args.latency_ms / 1e3
    return total


def gb(b):
    return f"{b / 1e9:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k3host", default="build/bin/k3host")
    ap.add_argument("--config", default="presets/auto.yaml", help="budgets fitted to each machine's memory")
    ap.add_argument("--geometry", default="k3")
    ap.add_argument("--machines", default="4,8,16")
    ap.add_argument("--ram-gb", default="32,64,128", help="memory each machine gives k3host (GB)")
    ap.add_argument("--disk-gbs", default="3,5,7", help="each machine's disk, GB/s")
    ap.add_argument("--link-gbps", type=float, default=10, help="the network between machines, Gbit/s")
    ap.add_argument("--latency-ms", type=float, default=0.1, help="per message between machines")
    ap.add_argument("--compute-s", type=float, default=21.6,
                    help="compute of one token of the whole model on one machine (default: K3 measured on a "
                         "2-vCPU VM, docs/benchmarks-log.md 'Full K3 geometry')")
    ap.add_argument("--speedup", type=float, default=1, help="how much faster each machine computes than that")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="more pipeline settings for every rank (repeatable)")
    args = ap.parse_args()
    args.set = [x for kv in args.set for x in ("--set", kv)]
    disks = [float(x) for x in args.disk_gbs.split(",")]
    print(f"{args.geometry} split over machines, {args.config}; compute {args.compute_s} s/token on one machine "
          f"/ speedup {args.speedup}; link {args.link_gbps:g} Gbit/s, {args.latency_ms:g} ms a message\n")
    print("| machines x GB | each holds: trunk layers pinned, experts held | read per token: trunk + experts (GB) "
          "| sent per token (kB) | compute s | " + " | ".join(f"s/token at {d:g} GB/s: I/O alone, with compute"
                                                            for d in disks) + " |")
    print("|---|---|---|---|---|" + "---|" * len(disks))
    for machines in [int(x) for x in args.machines.split(",")]:
        for ram in [float(x) for x in args.ram_gb.split(",")]:
            j = plan(args, machines, ram)
            ranks = j["ranks"]
            label = f"{machines} x {ram:g}"
            bad = [r["rank"] for r in ranks if not r["fits"]]
            if bad:
                print(f"| {label} | does not fit (rank {bad[0]}: {gb(ranks[bad[0]]['total_bytes'])} GB planned) |"
                      + " |" * (3 + len(disks)))
                continue
            layers = sum(r["last_layer"] - r["first_layer"] for r in ranks)
            pinned = sum(r["pinned_layers"] for r in ranks)
            held = sum(min(r["expert_slots"], r["experts"]) for r in ranks)
            experts = sum(r["experts"] for r in ranks)
            trunk = sum(r["trunk_bytes_read"] for r in ranks)
            exp = sum(r["expert_bytes_read"] for r in ranks)
            sent = sum(r["bytes_sent"] for r in ranks)
            touched = sum(r["bytes_touched"] for r in ranks)
            compute = args.compute_s / args.speedup
            preds = [f"{predict(ranks, d, args, touched, False):.3g}, {predict(ranks, d, args, touched):.3g}"
                     for d in disks]
            print(f"| {label} | {pinned}/{layers} pinned, {held / experts:.0%} of experts | "
                  f"{gb(trunk)} + {gb(exp)} | {sent / 1e3:.0f} | {compute:.1f} | "
                  + " | ".join(preds) + " |")
    print("\nFor comparison: colibri 9.4 s/token on one machine (lossy trunk, 32 GB); a fork of the C99 "
          "reference engine 56 ms/token on 16 sockets, all resident (docs/cluster.md).")


if __name__ == "__main__":
    main()
