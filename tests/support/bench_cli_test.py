#!/usr/bin/python3
"""CLI tests of `k3host bench` on the tiny model (run by ctest, tests/cmake/cli_bench.cmake).

  bench_cli_test.py --exe k3host --src SOURCE_DIR --work SCRATCH --case CASE

The model is written once (case `model`) into SCRATCH/model with two pipelines beside it:
A keeps everything resident, B streams the trunk and the experts through a cache of a few
slots. Both use one thread and a 32-token prompt.

CASE:
  model      make the tiny model and the two pipeline files.
  json       A/B with `--config` given twice after `bench` (bench's own option), -r 2, -n 4,
             --warmup 2, --set threads=1 for both: stdout is JSON and nothing else; runs
             alternate A B A B; each sample's metrics follow from its raw counts; the means
             and sds are those of the samples; the hit rate is null for resident A and in
             [0, 1] for B; B/A is mean(B) / mean(A) for every metric; the generated ids are the
             same in every repetition and in both pipelines (exactness); the progress is on
             stderr; the job's report file is not written.
  csv        the same A/B as CSV (header, 4 run rows, mean/sd per pipeline, a B/A ratio row
             equal to the printed means' ratio); one pipeline through the global --config
             before `bench` has no ratio row and 3 run rows with -r 3.
  table      the default table: one row per run, mean ± sd per pipeline and a B/A column that
             matches the printed means within their rounding; every sd has at most two
             significant digits and no more decimals than its mean, or is 0; -q hides the
             progress.
  reload     --reload: every repetition in a fresh worker, same ids as the kept workers.
  interrupt  SIGINT during a bench far too long to finish: exit 5, the repetitions done are
             printed as JSON with "interrupted": true, and a warning says how many; a worker
             killed with SIGKILL is exit 1 naming its pipeline and the signal.
  parallel   --parallel 1,3 on B (streamed) with sampling: two pipelines, the second with 3
             streams decoded together; stream 0 of every 3-stream repetition generates the
             1-stream repetitions' ids (exactness beside others), every stream as many tokens
             as asked; the decode figures are the streams' together (3 streams' tokens after
             the last one's first);
             --parallel 0 and a list with a word are refused.
  usage      exit 2 with a clear message: -r 0, -o xml, a missing pipeline file, no pipeline,
             -n 1, --prompt with --ids, an id outside the vocabulary (from the worker),
             cache.future set; --help says what is reset and what is kept.
"""
import argparse
import csv
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

PROMPT_IDS = "5,17,99,123,7,300,42,250,11,64,480,3,77,150,222,333,444,12,91,500,8,260,199,31,400,55,170,290,13,360,88,245"
METRICS = ["prefill_tokens_per_second", "decode_tokens_per_second", "seconds_per_token", "io_wait_per_token",
           "expert_io_wait_per_token", "hit_rate", "prefetch_hit_rate", "expert_bytes_per_token", "trunk_bytes_per_token",
           "table_bytes_per_token", "peak_rss_bytes"]


class Failure(Exception):
    pass


class Run:
    def __init__(self, args, code, out, err):
        self.args, self.code, self.out, self.err = args, code, out, err

    def shown(self):
        return "k3host %s\n--- exit code: %d\n--- stdout:\n%s\n--- stderr:\n%s" % (
            " ".join(self.args), self.code, self.out, self.err)


def check(cond, what, run=None):
    if not cond:
        raise Failure(what + ("\n" + run.shown() if run is not None else ""))


def k3host(opts, *args, env=None):
    p = subprocess.run([opts.exe] + list(args), capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **(env or {})), cwd=opts.src)
    return Run(list(args), p.returncode, p.stdout, p.stderr)


def close(a, b, rel=1e-9):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-300)


def mean_sd(values):
    v = [x for x in values if x is not None]
    if not v:
        return None, None
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def pipelines(opts):
    return [os.path.join(opts.work, "a.yaml"), os.path.join(opts.work, "b.yaml")]


def ab_args(opts, *extra):
    a, b = pipelines(opts)
    return ["bench", "--config", a, "--config", b, "--set", "threads=1", "--ids", PROMPT_IDS] + list(extra)


def case_model(opts):
    shutil.rmtree(opts.work, ignore_errors=True)
    os.makedirs(opts.work)
    r = k3host(opts, "make-model", "-g", "tiny", "-o", os.path.join(opts.work, "model"))
    check(r.code == 0, "make-model failed", r)
    common = ("extends: %s\nmodel:\n  path: %s\n  generate_if_missing: false\nthreads: 2\n"
              "job:\n  max_new_tokens: 3\n  report: %s\n") % (
        os.path.join(opts.src, "configs", "default.yaml"), os.path.join(opts.work, "model"),
        os.path.join(opts.work, "job-report.json"))
    with open(os.path.join(opts.work, "a.yaml"), "w") as f:
        f.write("description: bench test A, resident\n" + common +
                "memory:\n  trunk_gb: 1\n  expert_cache_gb: 1\n  context: 64\n")
    with open(os.path.join(opts.work, "b.yaml"), "w") as f:
        f.write("description: bench test B, streaming through a cache of a few slots\n" + common +
                "memory:\n  trunk_gb: 0.00005\n  expert_cache_gb: 0.00005\n  context: 64\n")


def check_json_result(j, run, labels, reps, new_tokens):
    check(j["repetitions"] == reps, "repetitions %r, expected %d" % (j["repetitions"], reps), run)
    check([p["label"] for p in j["pipelines"]] == labels, "pipelines %r" % [p["label"] for p in j["pipelines"]], run)
    order = [(o["pipeline"], o["repetition"]) for o in j["order"]]
    want = [(l, r + 1) for r in range(reps) for l in labels]
    check(order == want, "run order %r, expected %r (interleaved)" % (order, want), run)
    ids = None
    for p in j["pipelines"]:
        info = p["info"]
        check(len(p["samples"]) == reps, "%s: %d samples, expected %d" % (p["label"], len(p["samples"]), reps), run)
        check(info["new_tokens"] == new_tokens, "%s: new_tokens %r" % (p["label"], info["new_tokens"]), run)
        check(info["threads"] == 1, "%s: --set threads=1 not applied (threads %r)" % (p["label"], info["threads"]), run)
        check(info["prompt_ids"] == [int(x) for x in PROMPT_IDS.split(",")], "%s: prompt ids" % p["label"], run)
        for k, s in enumerate(p["samples"]):
            m = s["metrics"]
            where = "%s repetition %d" % (p["label"], k + 1)
            check(s["repetition"] == k + 1, where + ": repetition number", run)
            check(len(s["generated_ids"]) == new_tokens, where + ": %d ids" % len(s["generated_ids"]), run)
            check(s["decode_forwards"] == new_tokens - 1, where + ": decode_forwards", run)
            check(s["prompt_tokens"] == len(PROMPT_IDS.split(",")), where + ": prompt_tokens", run)
            check(close(m["decode_tokens_per_second"], s["decode_forwards"] / s["decode_seconds"]),
                  where + ": decode tokens/s is not forwards / seconds", run)
            check(close(m["seconds_per_token"], s["decode_seconds"] / s["decode_forwards"]), where + ": s/token", run)
            check(close(m["prefill_tokens_per_second"], s["prompt_tokens"] / s["prefill_seconds"]),
                  where + ": prefill tokens/s", run)
            d = s["decode_io"]
            for key, raw in (("expert_bytes_per_token", "expert_bytes"), ("trunk_bytes_per_token", "trunk_bytes"),
                             ("table_bytes_per_token", "table_bytes")):
                check(close(m[key], d[raw] / s["decode_forwards"]), where + ": " + key, run)
            check(close(m["io_wait_per_token"], d["io_wait_seconds"] / s["decode_forwards"]),
                  where + ": I/O wait per token", run)
            check(close(m["expert_io_wait_per_token"], d["expert_io_wait_seconds"] / s["decode_forwards"]),
                  where + ": expert I/O wait per token", run)
            check(0 <= d["expert_io_wait_seconds"] <= d["io_wait_seconds"] + 1e-6,
                  where + ": the experts' I/O wait is part of the whole", run)
            if d["expert_requests"] == 0:
                check(m["hit_rate"] is None, where + ": a hit rate without expert requests", run)
                check(m["prefetch_hit_rate"] is None, where + ": a prefetch hit rate without expert requests", run)
            else:
                check(0 <= m["hit_rate"] <= 1 and close(m["hit_rate"], d["expert_hits"] / d["expert_requests"]),
                      where + ": hit rate %r" % m["hit_rate"], run)
                check(close(m["prefetch_hit_rate"], d["prefetch_hits"] / d["expert_requests"]),
                      where + ": prefetch hit rate %r" % m["prefetch_hit_rate"], run)
                check(m["hit_rate"] + m["prefetch_hit_rate"] <= 1 + 1e-12,
                      where + ": hits and prefetch hits exceed the requests", run)
            check(m["peak_rss_bytes"] > 0, where + ": peak RSS", run)
            if ids is None:
                ids = s["generated_ids"]
            check(s["generated_ids"] == ids, where + ": generated ids %r differ from %r" % (s["generated_ids"], ids), run)
        check(p["generated_ids_identical"] is True, p["label"] + ": generated_ids_identical", run)
        for key in METRICS:
            m, sd = mean_sd([s["metrics"][key] for s in p["samples"]])
            got = p["summary"][key]
            check(close(got["mean"], m) and close(got["sd"], sd, 1e-6),
                  "%s: %s mean/sd %r, samples give %r/%r" % (p["label"], key, got, m, sd), run)
    return ids


def case_json(opts):
    report = os.path.join(opts.work, "job-report.json")
    if os.path.exists(report):
        os.remove(report)
    r = k3host(opts, *ab_args(opts, "-r", "2", "-n", "4", "--warmup", "2", "-o", "json"))
    check(r.code == 0, "bench -o json failed", r)
    try:
        j = json.loads(r.out)  # stdout is the JSON and nothing else
    except ValueError as e:
        raise Failure("stdout is not JSON (%s)\n%s" % (e, r.shown()))
    check_json_result(j, r, ["A", "B"], 2, 4)
    a, b = j["pipelines"]
    check(not a["info"]["streaming"] and b["info"]["streaming"], "A should be resident and B streaming", r)
    check(a["summary"]["hit_rate"]["mean"] is None, "resident A has a hit rate", r)
    check(b["summary"]["hit_rate"]["mean"] is not None, "streaming B has no hit rate", r)
    check(b["summary"]["expert_bytes_per_token"]["mean"] > 0, "B read no expert bytes while decoding", r)
    check(a["info"]["warmup_tokens"] == 2, "warm-up tokens %r" % a["info"]["warmup_tokens"], r)
    ratio = j["ratios"]["B/A"]
    check(sorted(ratio) == sorted(METRICS), "B/A metrics %r" % sorted(ratio), r)
    for key in METRICS:
        ma, mb = a["summary"][key]["mean"], b["summary"][key]["mean"]
        want = None if ma is None or mb is None or ma == 0 else mb / ma
        check(close(ratio[key], want), "B/A %s = %r, means give %r" % (key, ratio[key], want), r)
    check("\r" not in r.out and "[bench] info:" not in r.out, "progress on stdout", r)
    check(re.search(r"\[bench\] info: run 4/4: B repetition 2/2: token 4/4", r.err), "no progress on stderr", r)
    check(re.search(r"\[bench\] info: warm-up A: token 2/2", r.err), "no warm-up progress on stderr", r)
    check(not os.path.exists(report), "bench wrote the job's report " + report, r)


def parse_csv(run):
    rows = list(csv.DictReader(io.StringIO(run.out)))
    check(rows and list(rows[0].keys()) == ["row", "run", "pipeline", "config", "repetition"] + METRICS,
          "CSV header", run)
    num = lambda v: None if v == "" else float(v)
    return [dict(r, **{k: num(r[k]) for k in METRICS}) for r in rows]


def case_csv(opts):
    r = k3host(opts, *ab_args(opts, "-r", "2", "-n", "3", "--warmup", "0", "-o", "csv"))
    check(r.code == 0, "bench -o csv failed", r)
    rows = parse_csv(r)
    runs = [x for x in rows if x["row"] == "run"]
    check([(x["run"], x["pipeline"], x["repetition"]) for x in runs] ==
          [("1", "A", "1"), ("2", "B", "1"), ("3", "A", "2"), ("4", "B", "2")], "CSV run rows", r)
    means = {x["pipeline"]: x for x in rows if x["row"] == "mean"}
    sds = {x["pipeline"]: x for x in rows if x["row"] == "sd"}
    ratios = [x for x in rows if x["row"] == "ratio"]
    check(sorted(means) == ["A", "B"] and sorted(sds) == ["A", "B"], "CSV mean/sd rows", r)
    check(len(ratios) == 1 and ratios[0]["pipeline"] == "B/A", "CSV ratio row", r)
    for key in METRICS:
        for label in ("A", "B"):
            m, sd = mean_sd([x[key] for x in runs if x["pipeline"] == label])
            check(close(means[label][key], m) and close(sds[label][key], sd, 1e-6), "CSV %s %s mean/sd" % (label, key), r)
        ma, mb = means["A"][key], means["B"][key]
        want = None if ma is None or mb is None or ma == 0 else mb / ma
        check(close(ratios[0][key], want), "CSV B/A %s = %r, printed means give %r" % (key, ratios[0][key], want), r)
    for x in runs:
        if x["hit_rate"] is not None:
            check(0 <= x["hit_rate"] <= 1, "CSV hit rate %r" % x["hit_rate"], r)

    # One pipeline, given as the global --config before `bench`.
    a, _ = pipelines(opts)
    r = k3host(opts, "--config", a, "bench", "-r", "3", "-n", "2", "--ids", PROMPT_IDS, "-o", "csv")
    check(r.code == 0, "one pipeline through the global --config failed", r)
    rows = parse_csv(r)
    check([x["row"] for x in rows] == ["run"] * 3 + ["mean", "sd"], "rows %r" % [x["row"] for x in rows], r)
    check(rows[0]["config"] == a, "config column %r" % rows[0]["config"], r)


def table_value(text):
    """'12.34 ± 0.5 MB' → 12.34 scaled by the unit; None for n/a."""
    m = re.match(r"^(-?[0-9.]+)(?:%| ± [0-9.]+%?)?(?: (B|kB|MB|GB))?$", text.strip())
    if text.strip() == "n/a":
        return None
    check(m is not None, "a table cell %r" % text)
    scale = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, None: 1}[m.group(2)]
    return float(m.group(1)) * scale


def case_table(opts):
    r = k3host(opts, *ab_args(opts, "-r", "2", "-n", "3"))
    check(r.code == 0, "bench (table) failed", r)
    lines = r.out.splitlines()
    check(lines[0].startswith("[bench] info: ") is False and lines[0].startswith("k3host bench: 2 pipelines, 2 repetitions"),
          "table title", r)
    run_rows = [l for l in lines if re.match(r"^[1-4] +[AB][12] ", l)]
    check(len(run_rows) == 4, "%d run rows, expected 4" % len(run_rows), r)
    head = [l for l in lines if l.startswith("mean ± sd")]
    check(len(head) == 1 and re.search(r"A \(2\) +B \(2\) +B/A$", head[0]), "summary header", r)
    checked = 0
    for label in ("decode tokens/s", "s/token", "prefill tokens/s", "peak RSS"):
        row = [l for l in lines if l.startswith(label + "  ")]
        check(len(row) == 1, "no summary row " + label, r)
        cells = re.split(r"\s{2,}", row[0].strip())
        check(len(cells) == 4, "summary row %r" % row[0], r)
        ma, mb, q = table_value(cells[1]), table_value(cells[2]), float(cells[3])
        # 4 significant digits each: the ratio of the printed means agrees within 0.2%.
        check(math.isclose(q, mb / ma, rel_tol=2e-3, abs_tol=1.5e-3), "%s: B/A %s, printed means give %.4f" % (
            label, cells[3], mb / ma), r)
        checked += 1
    # Every "mean ± sd": the sd rounded to what is meaningful next to its mean (docs/benchmarks.md,
    # "k3host bench"): at most two significant digits, no more decimals than the mean, and "0"
    # when it rounds to nothing, never 0.000000000000143.
    summary = lines[lines.index(head[0]) + 1:]
    spreads = 0
    for line in summary:
        for mean, sd in re.findall(r"(-?[0-9.]+) ± ([0-9.]+)", line):
            decimals = lambda t: len(t.split(".")[1]) if "." in t else 0
            digits = sd.replace(".", "").lstrip("0") if "." in sd else sd.rstrip("0")
            check(sd == "0" or (0 < len(digits) <= 2 and decimals(sd) <= decimals(mean)),
                  "%r: the sd %s is not rounded to its mean %s" % (line, sd, mean), r)
            spreads += 1
    check(spreads >= 18, "only %d mean ± sd cells" % spreads, r)
    hit = [l for l in lines if l.startswith("expert-cache hit rate")]
    check(len(hit) == 1 and re.search(r"hit rate +n/a +[0-9.]+ ± [0-9.]+% +n/a$", hit[0]), "hit rate row", r)
    check("generated ids identical in all 2 repetitions" in r.out, "the table does not say the ids are identical", r)
    check("[bench] info: run 4/4: B repetition 2/2" in r.err and "bench:" not in r.out.replace("k3host bench:", ""),
          "progress belongs on stderr", r)

    q = k3host(opts, *ab_args(opts, "-r", "1", "-n", "2", "-q"))
    check(q.code == 0, "bench -q failed", q)
    check("k3host:" not in q.err, "-q still shows progress or info lines", q)
    check(re.search(r"^1 +A1 ", q.out, re.M), "-q hides the result too", q)


def case_reload(opts):
    kept = k3host(opts, *ab_args(opts, "-r", "2", "-n", "3", "-o", "json", "-q"))
    check(kept.code == 0, "bench (kept) failed", kept)
    r = k3host(opts, *ab_args(opts, "-r", "2", "-n", "3", "-o", "json", "--reload"))
    check(r.code == 0, "bench --reload failed", r)
    j = json.loads(r.out)
    check(j["reload"] is True, "reload flag in JSON", r)
    ids = check_json_result(j, r, ["A", "B"], 2, 3)
    check(ids == json.loads(kept.out)["pipelines"][0]["samples"][0]["generated_ids"], "--reload changed the ids", r)
    check(len(re.findall(r"warm-up [AB] repetition [12]/2: token 3/3", r.err)) == 4,
          "--reload: not one warm-up per repetition", r)


def case_parallel(opts):
    _, b = pipelines(opts)
    n = 5
    r = k3host(opts, "bench", "--config", b, "--ids", PROMPT_IDS, "-r", "2", "-n", str(n), "--warmup", "1", "-o", "json",
               "--parallel", "1,3", "--set", "job.sampling.temperature=0.9", "--set", "job.sampling.seed=4")
    check(r.code == 0, "bench --parallel failed", r)
    j = json.loads(r.out)
    ps = j["pipelines"]
    check([p["label"] for p in ps] == ["A", "B"], "two pipelines, one per stream count", r)
    check(ps[0]["info"]["streams"] == 1 and ps[1]["info"]["streams"] == 3, "streams in the info", r)
    check(ps[1]["config"].endswith("--parallel 3"), "the config names its streams", r)
    one = ps[0]["samples"][0]["generated_ids"]
    check(len(one) == n, "one stream generates -n tokens", r)
    for s in ps[1]["samples"]:
        ids = s["generated_ids"]
        check(len(ids) == 3 * n, "three streams generate 3 x -n tokens", r)
        check(ids[:n] == one, "stream 0 beside two others generated other ids than alone", r)
        check(ids[n:2 * n] != one, "stream 1 (seed + 1) generated the ids of stream 0", r)
        # The decode window starts when the last stream has its first token (the three 32-token
        # prompts take two steps of the 64-token prefill budget): each stream's tokens after it.
        check(3 * (n - 2) <= s["decode_forwards"] <= 3 * (n - 1), "the streams' decode forward passes together", r)
    for bad, message in (("0", r"--parallel: '0' is not a number of streams from 1 to 64"),
                         ("1,two", r"--parallel: 'two' is not a number of streams")):
        u = k3host(opts, "bench", "--config", b, "--parallel", bad)
        check(u.code == 2 and re.search(message, u.err), "--parallel %s not refused" % bad, u)


class LongBench:
    """A bench of A far too long to finish, its stdout and stderr read as they come; started()
    returns once the third run began."""
    REPS = 100000

    def __init__(self, opts):
        a, _ = pipelines(opts)
        self.args = ["bench", "--config", a, "--ids", PROMPT_IDS, "-r", str(self.REPS), "-n", "40", "--warmup", "0",
                     "-o", "json", "--set", "memory.context=256"]
        self.p = subprocess.Popen([opts.exe] + self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=opts.src)
        self.err, self.out = [], []
        self.seen = threading.Event()
        self.mark = ("run 3/%d" % self.REPS).encode()
        self.threads = [threading.Thread(target=self.pump, args=(self.p.stderr, self.err, True)),
                        threading.Thread(target=self.pump, args=(self.p.stdout, self.out, False))]
        for t in self.threads:
            t.start()

    def pump(self, stream, into, watch):
        tail = b""
        while True:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                return
            into.append(chunk)
            if watch and self.mark in tail + chunk:
                self.seen.set()
            tail = chunk[-len(self.mark):]

    @staticmethod
    def text(parts):
        return b"".join(parts).decode(errors="replace")

    def started(self):
        deadline = time.time() + 120
        while not self.seen.wait(0.1):
            if self.p.poll() is not None or time.time() > deadline:
                self.p.kill()
                self.finish()
                raise Failure("bench never reached run 3 (exit %r):\n%s" % (self.p.returncode, self.text(self.err)[-3000:]))

    def finish(self):
        try:
            self.p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.p.kill()
            raise Failure("bench did not stop:\n" + self.text(self.err)[-3000:])
        for t in self.threads:
            t.join()
        return Run(self.args, self.p.returncode, self.text(self.out), self.text(self.err)[-3000:])


def case_interrupt(opts):
    b = LongBench(opts)
    b.started()
    b.p.send_signal(signal.SIGINT)
    r = b.finish()
    check(r.code == 5, "SIGINT: expected exit 5", r)
    j = json.loads(r.out)
    n = len(j["pipelines"][0]["samples"])
    check(j["interrupted"] is True and 2 <= n < b.REPS, "interrupted %r with %d samples" % (j["interrupted"], n), r)
    check(len(j["order"]) == n, "order has %d runs for %d samples" % (len(j["order"]), n), r)
    check(re.search(r"interrupted by Ctrl-C after %d of %d runs" % (n, b.REPS), r.err), "no interruption warning", r)

    # A worker that dies (kill -9) is exit 1 naming the pipeline and the signal, not a hang.
    b = LongBench(opts)
    b.started()
    with open("/proc/%d/task/%d/children" % (b.p.pid, b.p.pid)) as f:
        workers = [int(x) for x in f.read().split()]
    check(len(workers) == 1, "expected one worker process, found %r" % workers)
    os.kill(workers[0], signal.SIGKILL)
    r = b.finish()
    killed = r"\[k3host\] error: bench: the worker process of [^\n]*a\.yaml was killed by signal 9 \([^)]*\) before it answered"
    check(r.code == 1 and re.search(killed, r.err), "a killed worker: expected exit 1 naming it", r)
    check(r.out == "", "a failed bench printed a result", r)


def case_usage(opts):
    a, b = pipelines(opts)
    cases = [
        (["bench", "--config", a, "-r", "0"], r"bench: -r/--repetitions must be at least 1 \(got 0\)"),
        (["bench", "--config", a, "-o", "xml"], r"bench: -o/--output: 'xml' is not an output format \(table, csv or json\)"),
        (["bench", "--config", a, "--config", os.path.join(opts.work, "no-such.yaml")],
         r"pipeline file '[^']*no-such\.yaml' does not exist"),
        (["bench"], r"bench: no pipeline given: use --config FILE"),
        (["bench", "--config", a, "-n", "1"], r"bench: -n must be at least 2 \(got 1\)"),
        (["bench", "--config", a, "--prompt", "hi", "--ids", "1,2"], r"bench: --prompt and --ids both given"),
        (["bench", "--config", a, "--ids", "5,99999"], r"the bench's prompt ids: '99999' is not a token id of this model"),
        (["bench", "--config", a, "--set", "cache.future=" + os.path.join(opts.work, "t.trace")],
         r"--set cache.future=[^:]*: cache.future: k3host bench does not use it: a trace describes one run"),
        (["bench", "--config", a, "--set", "job.max_new_tokens=1"],
         r"bench: 1 new token\(s\) per repetition \(job.max_new_tokens from --set job.max_new_tokens=1\)"),
    ]
    for args, message in cases:
        r = k3host(opts, *args)
        check(r.code == 2, "expected exit 2", r)
        check(re.search(r"\[k3host\] error: " + message, r.err), "stderr does not match %r" % message, r)
        check(r.out == "", "stdout not empty for a usage error", r)
    h = k3host(opts, "bench", "--help")
    check(h.code == 0, "bench --help", h)
    for needle in (r"--config FILE", r"-r,--repetitions N", r"--warmup N", r"-n,--new-tokens N", r"-o,--output FORMAT",
                   r"--reload", r"KV cache, the KDA state and the\s+position are reset", r"expert cache and trunk ring"):
        check(re.search(needle, h.out), "--help lacks %r" % needle, h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True)
    opts = ap.parse_args()
    opts.exe = os.path.abspath(opts.exe)
    try:
        globals()["case_" + opts.case](opts)
    except Failure as e:
        print("FAILED: %s" % e)
        return 1
    print("ok: " + opts.case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
