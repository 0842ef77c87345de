#!/usr/bin/python3
"""CLI tests of the http storage plugin against real loopback servers (run by ctest).

  http_cli_test.py --exe k3host --src SOURCE_DIR --work SCRATCH --case CASE

CASE:
  nginx      the tiny checkpoint served by nginx: resident and streamed generations through
             http print the same text and ids as posix; listing is not needed (the index
             json names the shards); a missing URL is exit 2 naming it.
  transient  fault_http_server.py injects each transient fault a few times (500, reset
             mid-body, a stall, a truncated body): retried, exit 0, ids identical to posix.
  permanent  each fault on every request for a routed expert's bytes: exit 4, naming the
             layer and expert and the fault; on the trunk's bytes: exit 1 with the fault.
  tiered     the tiered backend in front of http (nginx): a cold run and a warm run give
             posix's ids, the warm one reads nothing through http; `storage warm` fills the
             tier; kill -9 during a fill over a slow link (nginx limit_rate) leaves no block that is served torn: the
             next run gives posix's ids, a corrupted block is dropped and fetched again,
             and the killed writer's temporary files are removed.
  tls        https from nginx with a self-signed certificate: verified against ca_bundle
             (posix's ids; HTTP/2 puts every range on one connection, HTTP/1.1 on several),
             refused without it (verification is on by default), allowed with a warning
             with tls_verify: false.
  secret     a bearer token from an environment variable reaches the server and appears in
             no output, report or trace; without it, HTTP 401 is named.
  validators a server that sends no validator is refused at open (exit 2 naming the file and
             allow_unvalidated), read with one warning per file under allow_unvalidated;
             Last-Modified alone validates; a Last-Modified sent only on a file's first
             answer, one that changes, and another file's bytes served under the same name
             are refused as "changed on the server while reading" (exit 1, the report
             written with the reason), never mixed.
  redirect   a server redirecting every request to a second one on another port: the run
             gives posix's ids, the first server got the secret headers, the second none of
             them; a redirect within the first server keeps them.
  deadline   a server that accepts a trunk range mid-run and then stalls: with
             read_timeout_s: 2 the run ends about 2 s later, exit 1, a warning line while the
             range is retried, the message naming read_timeout_s, the report written with it.
  interrupt  SIGTERM while a trunk range stalls: exit 5 within a few seconds, the report
             written (interrupted, the cut wait named), no state saved.
  chat-interrupt
             k3host chat over the stalling server: Ctrl-C (SIGINT) while an answer's trunk
             range stalls stops the answer within a few seconds ([stopped], the cut read
             named), the chat goes on to its prompt, and /quit exits 0.
  serve-interrupt
             k3host serve over the stalling server: SIGINT while a request's trunk range
             stalls shuts the server down within a few seconds, exit 0.
  killed     the server killed mid-run: exit 1 while the trunk streams, exit 4 when only
             experts do (the trunk resident); the report written with the reason each time.
  names      shard names with a space, '?' and '#' are read over http (percent-encoded) as
             over posix; an index naming "%2e%2e%2f…" or a control character, and a folder
             holding a shard with '%', are exit 2 naming the index (or folder) and the name,
             over posix and http alike.
Exit 77 (skipped) when nginx is not installed. Servers listen on 127.0.0.1 only, and stop
with the test (or after their lifetime).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT_IDS = "5,17,99,123,7,300,42,250,11,64,480,3,77,150,222,333,444,12,91,500,8,260,199,31,400,55,170,290,13,360,88,245"


class Failure(Exception):
    pass


def check(cond, what, run=None):
    if not cond:
        raise Failure(what + ("\n" + run.shown() if run is not None else ""))


class Run:
    def __init__(self, args, proc):
        self.args, self.code, self.out, self.err = args, proc.returncode, proc.stdout, proc.stderr

    def shown(self):
        return "k3host %s\n--- exit code: %d\n--- stdout:\n%s\n--- stderr:\n%s" % (
            " ".join(self.args), self.code, self.out, self.err)


class Server:
    """A launcher (run_nginx.py or fault_http_server.py) in the background; port from a file."""

    def __init__(self, cmd, port_file):
        self.port_file = port_file
        if os.path.exists(port_file):
            os.remove(port_file)
        self.proc = subprocess.Popen(cmd)
        for _ in range(200):  # at most 10 s
            if os.path.exists(port_file):
                self.port = int(open(port_file).read())
                return
            code = self.proc.poll()
            if code is not None:
                if code == 77:
                    print("SKIP: nginx is not installed")
                    sys.exit(77)
                raise Failure("server %s exited with %d before listening" % (cmd, code))
            time.sleep(0.05)
        self.stop()
        raise Failure("server %s did not listen within 10 s" % cmd)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Test:
    def __init__(self, a):
        self.exe, self.src, self.work = a.exe, a.src, os.path.abspath(a.work)
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.servers = []

    def k3(self, *args, env=None):
        proc = subprocess.run([self.exe, *args], capture_output=True, text=True, errors="replace", timeout=600,
                              env=env if env is not None else os.environ.copy())
        return Run(list(args), proc)

    def common(self, streamed, tokens=4):
        out = ["--config", os.path.join(self.src, "configs/default.yaml"), "--set", "threads=1",
               "--set", "memory.context=64", "--set", "job.max_new_tokens=%d" % tokens,
               "--set", "job.stop_at_eos=false", "--set", "model.generate_if_missing=false"]
        if streamed:
            out += ["--set", "memory.trunk_gb=0.00005", "--set", "memory.expert_cache_gb=0.00005"]
        return out

    def make_model(self, one_shard):
        model = os.path.join(self.work, "model")
        geometry = "tiny"
        if one_shard:  # so a trunk-only fault region never shares a range request with experts
            text = open(os.path.join(self.src, "configs/models/tiny.yaml")).read()
            check("shard_size: 64KiB" in text, "configs/models/tiny.yaml has no 'shard_size: 64KiB' line")
            geometry = os.path.join(self.work, "tiny-one-shard.yaml")
            open(geometry, "w").write(text.replace("shard_size: 64KiB", "shard_size: 64MiB"))
        r = self.k3("make-model", "-g", geometry, "-o", model)
        check(r.code == 0, "make-model failed", r)
        return model

    def nginx(self, root, tls=None):
        s = Server([sys.executable, os.path.join(HERE, "run_nginx.py"), "--root", root,
                    "--prefix", os.path.join(self.work, "nginx"), "--port-file", os.path.join(self.work, "nginx.port"),
                    "--lifetime", "600", *(["--tls", *tls] if tls else [])], os.path.join(self.work, "nginx.port"))
        self.servers.append(s)
        return "%s://127.0.0.1:%d/m" % ("https" if tls else "http", s.port)

    def fault_server(self, root, fault, target, times, extra=(), name="fault"):
        port_file = os.path.join(self.work, name + ".port")
        s = Server([sys.executable, os.path.join(HERE, "fault_http_server.py"), "--root", root, "--port-file", port_file,
                    "--fault", fault, "--target", target, "--times", str(times), "--lifetime", "300", *extra], port_file)
        self.servers.append(s)
        return s, "http://127.0.0.1:%d" % s.port

    def generate(self, model_path, streamed, out_name, storage=None, params=None, ids=True, env=None, extra=()):
        args = self.common(streamed) + ["--set", "model.path=" + model_path, "--out", os.path.join(self.work, out_name)]
        if storage:
            args += ["--set", "storage.plugin=" + storage]
        if params:
            args += ["--set", "storage.params={%s}" % ", ".join("%s: '%s'" % kv for kv in params.items())]
        if ids:
            args += ["--ids", PROMPT_IDS]
        if "--verbose" not in extra:
            args += ["--quiet"]
        return self.k3(*args, *extra, env=env)

    def report_ids(self, name):
        return json.load(open(os.path.join(self.work, name)))["generated_ids"]

    def report(self, name):
        path = os.path.join(self.work, name)
        return json.load(open(path)) if os.path.exists(path) else None

    def start_generate(self, model_path, out_name, params, extra=()):
        """generate() in the background: the Popen, stdout and stderr to files."""
        args = self.common(True) + ["--set", "model.path=" + model_path, "--out", os.path.join(self.work, out_name),
                                    "--set", "storage.plugin=http", "--ids", PROMPT_IDS, "--quiet",
                                    "--set", "storage.params={%s}" % ", ".join("%s: '%s'" % kv for kv in params.items()),
                                    *extra]
        out = open(os.path.join(self.work, out_name + ".stdout"), "w")
        err = open(os.path.join(self.work, out_name + ".stderr"), "w")
        return subprocess.Popen([self.exe, *args], stdout=out, stderr=err), args

    def finished(self, proc, args, out_name):
        class Done:
            pass
        d = Done()
        d.returncode = proc.returncode
        d.stdout = open(os.path.join(self.work, out_name + ".stdout")).read()
        d.stderr = open(os.path.join(self.work, out_name + ".stderr"), errors="replace").read()
        return Run(args, d)

    def close(self):
        for s in self.servers:
            s.stop()


FAST_RETRIES = {"retries": "4", "backoff_ms": "20", "backoff_max_ms": "200", "low_speed_time_s": "1",
                "connect_timeout_ms": "2000"}


def case_nginx(t):
    model = t.make_model(one_shard=False)
    base = t.nginx(model)
    for streamed in (False, True):
        plain = t.generate(model, streamed, "plain.json", ids=False)
        check(plain.code == 0, "the posix run failed", plain)
        r = t.generate(base + "/", streamed, "http.json", storage="http", ids=False)
        check(r.code == 0, "the http run (streamed=%s) failed" % streamed, r)
        check(r.out == plain.out, "the http run printed other text than posix\n--- posix:\n" + plain.out, r)
        check(t.report_ids("http.json") == t.report_ids("plain.json"),
              "http ids %s, posix %s" % (t.report_ids("http.json"), t.report_ids("plain.json")), r)
        check(len(t.report_ids("http.json")) == 4, "expected 4 generated ids", r)
        # Without the trailing slash, with one connection, with HTTP/1.1 only and no coalescing.
        r = t.generate(base, streamed, "http1.json", storage="http", ids=False,
                       params={"connections": "1", "http_version": "1.1", "max_range_bytes": "4096"})
        check(r.code == 0 and t.report_ids("http1.json") == t.report_ids("plain.json"),
              "http with one connection and 4 KiB ranges differs from posix", r)
    r = t.generate(base + "/nothing/", False, "none.json", storage="http", ids=False)
    check(r.code == 2 and "/m/nothing/: no checkpoint there" in r.err, "a missing URL: expected exit 2 naming it", r)
    r = t.generate(base, False, "bad.json", storage="http", ids=False, params={"connections": "0"})
    check(r.code == 2 and "connections" in r.err, "connections=0: expected exit 2 naming the key", r)
    r = t.generate(base, False, "bad.json", storage="http", ids=False, params={"conections": "4"})
    check(r.code == 2 and "conections" in r.err, "an unknown key: expected exit 2 naming it", r)


TRANSIENT = ["500", "reset", "stall", "truncate"]


def case_transient(t):
    model = t.make_model(one_shard=True)
    plain = t.generate(model, True, "plain.json")
    check(plain.code == 0, "the posix run failed", plain)
    for fault in TRANSIENT:
        s, base = t.fault_server(model, fault, "trunk", 3, ["--stall-seconds", "3"])
        started = time.monotonic()
        r = t.generate(base + "/", True, "f.json", storage="http", params=FAST_RETRIES, extra=["--verbose"])
        s.stop()
        print("transient %s: %.1f s" % (fault, time.monotonic() - started))
        check(r.code == 0, "transient %s: expected a retried, successful run" % fault, r)
        check(t.report_ids("f.json") == t.report_ids("plain.json"),
              "transient %s: ids %s, posix %s" % (fault, t.report_ids("f.json"), t.report_ids("plain.json")), r)
        m = re.search(r"\((\d+) retries\)", r.err)
        check(m is not None and int(m.group(1)) >= 3, "transient %s: the summary line names fewer than 3 retries" % fault, r)


# fault -> what the message must say (a regular expression)
PERMANENT = {
    "500": "HTTP 500",
    "reset": "connection reset|truncated body",  # libcurl reports a reset mid-body as either
    "truncate": "truncated body",
    "badrange": "wrong Content-Range",
    "norange": "ignored the Range header",
    "etag": "changed on the server while reading",
}


def case_permanent(t):
    model = t.make_model(one_shard=True)
    params = dict(FAST_RETRIES, retries="1")
    for fault, says in PERMANENT.items():
        for target, code in (("experts", 4), ("trunk", 1)):
            s, base = t.fault_server(model, fault, target, -1)
            r = t.generate(base + "/", True, "f.json", storage="http", params=params)
            s.stop()
            what = "permanent %s on the %s" % (fault, target)
            check(r.code == code, "%s: expected exit %d" % (what, code), r)
            check(re.search(says, r.err) is not None, "%s: stderr does not say '%s'" % (what, says), r)
            check("127.0.0.1:%d/model-00001-of-00001.safetensors: bytes " % s.port in r.err,
                  "%s: stderr does not name the URL and range" % what, r)
            if target == "experts":
                check("layer " in r.err and " expert " in r.err, "%s: stderr names no layer and expert" % what, r)
                # The run finished: the report holds every generated token.
                check(len(t.report_ids("f.json")) == 4, "%s: the run did not finish" % what, r)


def case_secret(t):
    model = t.make_model(one_shard=False)
    secret = "k3-test-secret-7f3a9c"
    os.environ["K3_TEST_TOKEN"] = secret  # for the server (it checks the header) and k3host
    env = os.environ.copy()
    s, base = t.fault_server(model, "none", "all", 0, ["--require-auth-env", "K3_TEST_TOKEN"])
    plain = t.generate(model, True, "plain.json")
    check(plain.code == 0, "the posix run failed", plain)
    trace = os.path.join(t.work, "trace.out")
    r = t.generate(base + "/", True, "s.json", storage="http", params={"bearer_token_env": "K3_TEST_TOKEN"}, env=env,
                   extra=["--verbose", "--set", "trace.out=" + trace])
    check(r.code == 0, "with the token: expected a successful run", r)
    check(t.report_ids("s.json") == t.report_ids("plain.json"), "with the token: other ids than posix", r)
    outputs = [r.out, r.err, open(os.path.join(t.work, "s.json")).read()]
    check(os.path.exists(trace), "the run wrote no trace at %s" % trace, r)
    outputs.append(open(trace, errors="replace").read())
    log = os.path.join(t.work, "secret.log")
    r2 = t.generate(base + "/", True, "s2.json", storage="http", params={"bearer_token_env": "K3_TEST_TOKEN"}, env=env,
                    extra=["--verbose", "--verbose", "--log-file", log])
    check(r2.code == 0 and os.path.exists(log), "a -vv run with a log file failed", r2)
    outputs += [r2.out, r2.err, open(log, errors="replace").read()]
    check(not any(secret in o for o in outputs), "the token appears in the output, the report or the trace", r)
    r = t.generate(base + "/", True, "n.json", storage="http", params={"bearer_token_env": "K3_TEST_TOKEN_UNSET"})
    check(r.code == 2 and "K3_TEST_TOKEN_UNSET is not set" in r.err, "an unset token variable: expected exit 2", r)
    r = t.generate(base + "/", True, "n.json", storage="http")
    check(r.code != 0 and "HTTP 401 (access denied" in r.err, "without the token: expected HTTP 401 named", r)
    s.stop()


def tier_stats(err):
    m = re.search(r"\[storage/tiered\] info: (\d+) bytes from the tier, (\d+) from the inner backend.*?(\d+) torn", err)
    return tuple(int(x) for x in m.groups()) if m else None


def case_tiered(t):
    model = t.make_model(one_shard=False)
    base = t.nginx(model) + "/"
    plain = t.generate(model, True, "plain.json")
    check(plain.code == 0, "the posix run failed", plain)
    want = t.report_ids("plain.json")
    tier = os.path.join(t.work, "tier")
    params = {"dir": tier, "block_kb": "16"}
    for label in ("cold", "warm"):
        r = t.generate(base, True, label + ".json", storage="tiered", params=params, extra=["--verbose"])
        check(r.code == 0 and t.report_ids(label + ".json") == want, "tiered %s run: ids differ from posix" % label, r)
        stats = tier_stats(r.err)
        check(stats is not None, "tiered %s run: no summary line" % label, r)
        if label == "cold":
            check(stats[1] > 0, "the cold run read nothing from http", r)
        else:
            check(stats[1] == 0 and stats[0] > 0, "the warm run read %d bytes through http" % stats[1], r)
    # A cap below the model: blocks are evicted, output unchanged, the tier stays under it.
    capped = os.path.join(t.work, "tier-capped")
    r = t.generate(base, True, "capped.json", storage="tiered", params={"dir": capped, "block_kb": "16", "max_mb": "1"},
                   extra=["--verbose"])
    check(r.code == 0 and t.report_ids("capped.json") == want, "a capped tier changed the ids", r)
    # storage warm, then a run that needs nothing from http.
    warmed = os.path.join(t.work, "tier-warmed")
    common = ["--config", os.path.join(t.src, "configs/default.yaml"), "--set", "model.path=" + base,
              "--set", "storage.plugin=tiered", "--set", "storage.params={dir: '%s', block_kb: 16}" % warmed]
    r = t.k3("storage", "warm", *common)
    check(r.code == 0 and "warm: read" in r.out and "100%" in r.err, "storage warm failed or showed no progress", r)
    r = t.generate(base, True, "warmed.json", storage="tiered", params={"dir": warmed, "block_kb": "16"}, extra=["--verbose"])
    stats = tier_stats(r.err)
    check(r.code == 0 and t.report_ids("warmed.json") == want and stats and stats[1] == 0,
          "after storage warm: expected posix's ids and nothing read through http", r)
    # kill -9 during a fill over a slow link (nginx's limit_rate at /slow/), several times at
    # different moments.
    killed = os.path.join(t.work, "tier-killed")
    slow_base = base.replace("/m/", "/slow/")
    check(slow_base != base, "the nginx base URL has no /m/ to turn into /slow/: " + base)
    slow = ["--config", os.path.join(t.src, "configs/default.yaml"), "--set", "model.path=" + slow_base,
            "--set", "storage.plugin=tiered",
            "--set", "storage.params={dir: '%s', block_kb: 16, inner: http, inner.connections: 1}" % killed]
    for delay in (0.15, 0.3, 0.45):
        proc = subprocess.Popen([t.exe, "storage", "warm", *slow], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    blocks = [os.path.join(d, f) for d, _, fs in os.walk(killed) for f in fs if f.endswith(".blk")]
    check(len(blocks) > 0, "nothing reached the tier before kill -9 (the fill was too fast to test)")
    # Corrupt one block's data, truncate another: both must be dropped, never served.
    with open(blocks[0], "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    if len(blocks) > 1:
        os.truncate(blocks[1], 60)
    open(os.path.join(os.path.dirname(blocks[0]), ".0.blk.tmp.999999999.1"), "wb").write(b"half")
    # The same URL as the fill (the tier is keyed by URI and size), now over 8 connections.
    r = t.generate(slow_base, True, "after-kill.json", storage="tiered", params={"dir": killed, "block_kb": "16"},
                   extra=["--verbose"])
    stats = tier_stats(r.err)
    check(r.code == 0 and t.report_ids("after-kill.json") == want, "after kill -9 the tiered run differs from posix", r)
    check(stats is not None and stats[2] >= 1, "the corrupted block was not detected as torn", r)
    leftovers = [f for _, _, fs in os.walk(killed) for f in fs if ".tmp." in f]
    check(not leftovers, "temporary files of dead writers remain: %s" % leftovers, r)


def case_tls(t):
    openssl = shutil.which("openssl")
    if openssl is None:
        print("SKIP: openssl is not installed")
        sys.exit(77)
    cert, key = os.path.join(t.work, "cert.pem"), os.path.join(t.work, "key.pem")
    r = subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       capture_output=True, text=True)
    check(r.returncode == 0, "openssl could not make a certificate: " + r.stderr)
    model = t.make_model(one_shard=False)
    base = t.nginx(model, tls=(cert, key)) + "/"
    plain = t.generate(model, True, "plain.json")
    check(plain.code == 0, "the posix run failed", plain)
    # Verified against the test CA: posix's ids; HTTP/2 multiplexes every range on one connection.
    r = t.generate(base, True, "tls.json", storage="http", params={"ca_bundle": cert}, extra=["--verbose"])
    check(r.code == 0 and t.report_ids("tls.json") == t.report_ids("plain.json"), "https with ca_bundle: ids differ", r)
    m = re.search(r"(\d+) connections opened", r.err)
    check(m is not None and int(m.group(1)) == 1, "https with HTTP/2 offered: expected one multiplexed connection", r)
    r = t.generate(base, True, "tls11.json", storage="http", params={"ca_bundle": cert, "http_version": "1.1"},
                   extra=["--verbose"])
    m = re.search(r"(\d+) connections opened", r.err)
    check(r.code == 0 and t.report_ids("tls11.json") == t.report_ids("plain.json") and m and int(m.group(1)) > 1,
          "https with HTTP/1.1: expected posix's ids over several connections", r)
    # Verification is on by default: a self-signed certificate is refused, naming it.
    r = t.generate(base, True, "noca.json", storage="http")
    check(r.code != 0 and "TLS verification failed" in r.err, "https without the CA: expected a TLS verification failure", r)
    r = t.generate(base, True, "insecure.json", storage="http", params={"tls_verify": "false"}, extra=["--verbose"])
    check(r.code == 0 and "tls_verify is false" in r.err, "tls_verify: false: expected a run with a warning", r)


def case_validators(t):
    model = t.make_model(one_shard=True)
    shard = "model-00001-of-00001.safetensors"
    plain = t.generate(model, True, "plain.json")
    check(plain.code == 0, "the posix run failed", plain)
    want = t.report_ids("plain.json")
    # No validator at all: refused at open, naming the file and the parameter.
    s, base = t.fault_server(model, "novalidators", "all", -1)
    r = t.generate(base + "/", True, "nv.json", storage="http", params=FAST_RETRIES)
    check(r.code == 2 and "neither ETag nor Last-Modified" in r.err and "allow_unvalidated" in r.err and
          "/config.json" in r.err, "no validators: expected exit 2 naming the file and allow_unvalidated", r)
    r = t.generate(base + "/", True, "nv.json", storage="http", params=dict(FAST_RETRIES, allow_unvalidated="true"))
    check(r.code == 0 and t.report_ids("nv.json") == want, "allow_unvalidated: expected posix's ids", r)
    warned = r.err.count("%s: the server sends neither ETag nor Last-Modified" % shard)
    check(warned == 1, "allow_unvalidated: expected one warning for the shard, got %d" % warned, r)
    s.stop()
    # Last-Modified alone is a validator.
    s, base = t.fault_server(model, "lm-only", "all", -1)
    r = t.generate(base + "/", True, "lm.json", storage="http", params=FAST_RETRIES)
    check(r.code == 0 and t.report_ids("lm.json") == want, "Last-Modified alone: expected posix's ids", r)
    s.stop()
    # Answers of another version: refused, exit 1, the report written with the reason.
    swapped = os.path.join(t.work, "swapped.safetensors")
    data = bytearray(open(os.path.join(model, shard), "rb").read())
    data[-1] ^= 0xFF
    open(swapped, "wb").write(bytes(data))
    later = os.path.getmtime(os.path.join(model, shard)) + 100
    os.utime(swapped, (later, later))
    for fault, names, says in (("lm-first", "/config.json", "Last-Modified '[^']+' at open, now none"),
                               ("lm-change", "/config.json", "Last-Modified '[^']+' at open, now '"),
                               ("swap", "/" + shard, "ETag '[^']+' at open, now '")):
        s, base = t.fault_server(model, fault, "all", -1, ["--swap-name", shard, "--swap-with", swapped])
        r = t.generate(base + "/", True, "v.json", storage="http", params=FAST_RETRIES)
        s.stop()
        check(r.code == 1, "%s: expected exit 1" % fault, r)
        check(re.search(re.escape(names) + ": bytes [0-9]+-[0-9]+: the file changed on the server while reading \\(" +
                        says, r.err) is not None, "%s: the message does not name the file and the change" % fault, r)
        rep = t.report("v.json")
        check(rep is not None and rep["exit_code"] == 1 and "changed on the server while reading" in (rep["failure"] or ""),
              "%s: the report of the failed run is missing or has no reason" % fault, r)
        os.remove(os.path.join(t.work, "v.json"))


def headers_seen(path):
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def case_redirect(t):
    model = t.make_model(one_shard=False)
    token, key = "k3-redirect-token-51d2", "k3-redirect-key-9e04"
    os.environ["K3_TEST_TOKEN"], os.environ["K3_TEST_HEADER"] = token, "X-K3-Key: " + key
    plain = t.generate(model, True, "plain.json")
    check(plain.code == 0, "the posix run failed", plain)
    params = {"bearer_token_env": "K3_TEST_TOKEN", "header_env": "K3_TEST_HEADER"}
    b_log, a_log = os.path.join(t.work, "b.jsonl"), os.path.join(t.work, "a.jsonl")
    b, b_base = t.fault_server(model, "none", "all", 0, ["--record-headers", b_log], name="b")
    a, a_base = t.fault_server(model, "none", "all", 0, ["--redirect-to", b_base, "--record-headers", a_log], name="a")
    r = t.generate(a_base + "/", True, "r.json", storage="http", params=params)
    check(r.code == 0 and t.report_ids("r.json") == t.report_ids("plain.json"),
          "redirected to another port: expected posix's ids", r)
    first, second = headers_seen(a_log), headers_seen(b_log)
    check(first and second, "the redirect was not followed (requests: first %d, second %d)" % (len(first), len(second)), r)
    check(all(h["headers"].get("X-K3-Key") == key and h["headers"].get("Authorization") == "Bearer " + token
              for h in first), "the first server did not get the secret headers on every request", r)
    leaked = [h for h in second if token in json.dumps(h) or key in json.dumps(h) or "X-K3-Key" in h["headers"]]
    check(not leaked, "a secret header went to the other origin: %s" % leaked[:1], r)
    a.stop()
    # Within the same origin (scheme, host and port) the headers stay.
    same_log = os.path.join(t.work, "same.jsonl")
    c, c_base = t.fault_server(model, "none", "all", 0, ["--redirect-to", "/r", "--record-headers", same_log], name="c")
    r = t.generate(c_base + "/", True, "same.json", storage="http", params=params)
    check(r.code == 0 and t.report_ids("same.json") == t.report_ids("plain.json"), "a same-origin redirect failed", r)
    hops = [h for h in headers_seen(same_log) if h["path"].startswith("/r/")]
    check(hops and all(h["headers"].get("X-K3-Key") == key for h in hops),
          "a redirect within the same origin dropped the headers", r)


def stalled_server(t, model, marker, stall_seconds):
    """A server that, once the run asks for an expert, accepts every trunk range and stalls."""
    return t.fault_server(model, "hang", "trunk", -1, ["--armed-by-experts", "--stall-seconds", str(stall_seconds),
                                                       "--hang-marker", marker])


def wait_for(path, seconds, proc):
    end = time.monotonic() + seconds
    while time.monotonic() < end and not os.path.exists(path) and proc.poll() is None:
        time.sleep(0.02)
    return os.path.exists(path)


def case_deadline(t):
    model = t.make_model(one_shard=True)
    marker = os.path.join(t.work, "hang.marker")
    s, base = stalled_server(t, model, marker, 120)
    params = dict(FAST_RETRIES, read_timeout_s="2")
    proc, args = t.start_generate(base + "/", "d.json", params)
    check(wait_for(marker, 120, proc), "the run never reached the stalling range")
    stalled_at = time.monotonic()
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Failure("the run did not end within 60 s of the stall (read_timeout_s: 2)")
    waited = time.monotonic() - stalled_at
    r = t.finished(proc, args, "d.json")
    print("deadline: ended %.1f s after the stall began" % waited)
    check(r.code == 1, "a stalled trunk range: expected exit 1", r)
    check(waited < 2 + 4, "the run ended %.1f s after the stall, not about read_timeout_s (2 s) later" % waited, r)
    check(re.search(r"bytes [0-9]+-[0-9]+: not read within read_timeout_s = 2 s", r.err) is not None,
          "the message does not name the range and read_timeout_s", r)
    check(re.search(r"\[storage/http\] warning: .*/model-00001-of-00001\.safetensors: bytes [0-9]+-[0-9]+: timed out.*"
                    r"\(attempt 1 of 5; retrying in", r.err) is not None,
          "no warning line while the range was retried", r)
    rep = t.report("d.json")
    check(rep is not None and rep["exit_code"] == 1 and "read_timeout_s" in (rep["failure"] or ""),
          "the report of the timed-out run is missing or has no reason", r)


def case_interrupt(t):
    model = t.make_model(one_shard=True)
    marker = os.path.join(t.work, "hang.marker")
    s, base = stalled_server(t, model, marker, 120)
    state = os.path.join(t.work, "i.state")
    proc, args = t.start_generate(base + "/", "i.json", FAST_RETRIES, ["--save-state", state])
    check(wait_for(marker, 120, proc), "the run never reached the stalling range")
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Failure("SIGTERM during a storage stall: the run did not end within 30 s")
    waited = time.monotonic() - sent
    r = t.finished(proc, args, "i.json")
    print("interrupt: ended %.1f s after SIGTERM" % waited)
    check(r.code == 5, "SIGTERM during a storage stall: expected exit 5", r)
    check(waited < 5, "SIGTERM during a storage stall: the run took %.1f s to end" % waited, r)
    check("interrupted by SIGTERM" in r.err and "cut a storage wait short" in r.err and "no state was saved" in r.err,
          "the interrupt line does not say that a storage wait was cut and no state saved", r)
    check(not os.path.exists(state), "a state was saved from a cut forward pass", r)
    rep = t.report("i.json")
    check(rep is not None and rep["interrupted"] and rep["exit_code"] == 5 and
          "abandoned, the run is stopping" in (rep["failure"] or ""),
          "the report of the interrupted run is missing or does not name the cut wait", r)


def stalled_args(t, base, extra=()):
    """The pipeline flags of a run that streams the one-shard tiny model from `base` over http."""
    params = ", ".join("%s: '%s'" % kv for kv in FAST_RETRIES.items())
    return ["--config", os.path.join(t.src, "configs/default.yaml"), "--set", "threads=1",
            "--set", "memory.context=256", "--set", "memory.trunk_gb=0.00005", "--set", "memory.expert_cache_gb=0.00005",
            "--set", "model.generate_if_missing=false", "--set", "model.path=" + base + "/",
            "--set", "storage.plugin=http", "--set", "storage.params={%s}" % params, *extra]


def read_text(path):
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def wait_text(path, pattern, seconds, proc):
    """Until `pattern` shows in the file (a regular expression); the match, or None."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        m = re.search(pattern, read_text(path))
        if m or proc.poll() is not None:
            return m
        time.sleep(0.02)
    return None


def case_chat_interrupt(t):
    model = t.make_model(one_shard=True)
    marker = os.path.join(t.work, "hang.marker")
    s, base = stalled_server(t, model, marker, 120)
    out_path, err_path = os.path.join(t.work, "chat.stdout"), os.path.join(t.work, "chat.stderr")
    args = ["chat", *stalled_args(t, base), "--max-tokens", "8"]
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([t.exe, *args], stdin=subprocess.PIPE, stdout=out, stderr=err)
    d = type("Done", (), {})()
    try:
        proc.stdin.write(b"Hello there\n")
        proc.stdin.flush()
        check(wait_for(marker, 120, proc), "the chat never reached the stalling range")
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        stopped = wait_text(out_path, r"\[stopped\]", 30, proc)
        waited = time.monotonic() - sent
        print("chat-interrupt: the answer stopped %.1f s after SIGINT" % waited)
        proc.stdin.write(b"/quit\n")
        proc.stdin.close()
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Failure("the chat did not end within 30 s of /quit")
    d.returncode, d.stdout, d.stderr = proc.returncode, read_text(out_path), read_text(err_path)
    r = Run(args, d)
    check(stopped is not None, "Ctrl-C during a storage stall: no [stopped] within 30 s", r)
    check(waited < 5, "Ctrl-C during a storage stall: the answer took %.1f s to stop" % waited, r)
    check("a storage read was cut short" in r.out, "the screen does not say that a storage read was cut short", r)
    check(r.code == 0, "/quit after the stopped answer: expected exit 0", r)


def case_serve_interrupt(t):
    model = t.make_model(one_shard=True)
    marker = os.path.join(t.work, "hang.marker")
    s, base = stalled_server(t, model, marker, 120)
    err_path = os.path.join(t.work, "serve.stderr")
    args = ["serve", *stalled_args(t, base), "--port", "0"]
    with open(err_path, "w") as err:
        proc = subprocess.Popen([t.exe, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    d = type("Done", (), {})()
    try:
        m = wait_text(err_path, r"ready on http://127\.0\.0\.1:(\d+)", 120, proc)
        check(m is not None, "the server never became ready:\n" + read_text(err_path))
        answers = []

        def ask():
            try:
                c = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=60)
                c.request("POST", "/v1/chat/completions", json.dumps(
                    {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8}),
                    {"Content-Type": "application/json"})
                answers.append(c.getresponse().status)
            except OSError as e:
                answers.append(str(e))

        client = threading.Thread(target=ask)
        client.start()
        check(wait_for(marker, 120, proc), "the request never reached the stalling range")
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        proc.wait(30)
        waited = time.monotonic() - sent
        client.join(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Failure("SIGINT during a storage stall: the server did not stop within 30 s\n" + read_text(err_path))
    print("serve-interrupt: stopped %.1f s after SIGINT (the request got %s)" % (waited, answers))
    d.returncode, d.stdout, d.stderr = proc.returncode, "", read_text(err_path)
    r = Run(args, d)
    check(waited < 5, "SIGINT during a storage stall: the server took %.1f s to stop" % waited, r)
    check(r.code == 0, "SIGINT during a storage stall: expected exit 0", r)


def case_killed(t):
    model = t.make_model(one_shard=True)
    params = dict(FAST_RETRIES, retries="0")
    # The trunk streams: the server dies at the first trunk range after an expert's.
    s, base = t.fault_server(model, "die", "trunk", -1, ["--armed-by-experts"])
    r = t.generate(base + "/", True, "k.json", storage="http", params=params)
    s.stop()
    check(r.code == 1 and re.search("cannot connect|connection reset|truncated body", r.err) is not None,
          "the server killed while the trunk streams: expected exit 1 naming the failure", r)
    rep = t.report("k.json")
    check(rep is not None and rep["exit_code"] == 1 and rep["failure"], "exit 1: the report is missing or has no reason", r)
    # The trunk resident, the experts streamed, one forward pass (one prompt token, one new
    # token): after its embedding row nothing but experts is read, so the run finishes
    # without them, exit 4.
    s, base = t.fault_server(model, "die", "experts", -1)
    r = t.generate(base + "/", False, "k4.json", storage="http", params=params, ids=False,
                   extra=["--ids", "5", "--set", "job.max_new_tokens=1", "--set", "memory.expert_cache_gb=0.00005"])
    s.stop()
    check(r.code == 4 and "routed expert failed" in r.err, "the server killed while experts stream: expected exit 4", r)
    rep = t.report("k4.json")
    check(rep is not None and rep["exit_code"] == 4 and rep["expert_failures"] and
          "routed expert read(s) failed" in (rep["failure"] or "") and len(rep["generated_ids"]) == 1,
          "exit 4: the report is missing, incomplete or has no reason", r)


def rename_shard(model, old, new):
    """Renames a shard of `model` and the index's mentions of it."""
    os.rename(os.path.join(model, old), os.path.join(model, new))
    index = os.path.join(model, "model.safetensors.index.json")
    text = open(index).read()
    check(json.dumps(old) in text, "the index does not name " + old)
    open(index, "w").write(text.replace(json.dumps(old), json.dumps(new)))


def case_names(t):
    model = t.make_model(one_shard=False)
    shards = sorted(f for f in os.listdir(model) if f.endswith(".safetensors"))
    check(len(shards) > 1, "expected a checkpoint of several shards")
    odd = os.path.join(t.work, "odd")
    shutil.copytree(model, odd)
    rename_shard(odd, shards[0], "shard one?#&+.safetensors")
    plain = t.generate(model, True, "plain.json")
    check(plain.code == 0, "the posix run failed", plain)
    r = t.generate(odd, True, "odd-posix.json")
    check(r.code == 0 and t.report_ids("odd-posix.json") == t.report_ids("plain.json"),
          "a shard named with a space, '?' and '#' over posix: expected the same ids", r)
    base = t.nginx(t.work)  # serves the folder holding both checkpoints
    r = t.generate(base + "/odd/", True, "odd-http.json", storage="http")
    check(r.code == 0 and t.report_ids("odd-http.json") == t.report_ids("plain.json"),
          "a shard named with a space, '?' and '#' over http: expected posix's ids", r)
    for label, name, shown in (("escaped", "%2e%2e%2fevil.safetensors", "%2e%2e%2fevil.safetensors"),
                               ("control", "a\x01b.safetensors", "a\\x01b.safetensors")):
        bad = os.path.join(t.work, label)
        shutil.copytree(model, bad)
        index = os.path.join(bad, "model.safetensors.index.json")
        text = open(index).read()
        open(index, "w").write(text.replace(json.dumps(shards[1]), json.dumps(name), 1))
        for where, path, storage in (("posix", bad, None), ("http", base + "/" + label + "/", "http")):
            r = t.generate(path, True, "bad.json", storage=storage)
            check(r.code == 2 and "model.safetensors.index.json: tensor '" in r.err and
                  "shard '" + shown + "' is not a plain .safetensors file name" in r.err,
                  "%s name in the index over %s: expected exit 2 naming the index and the name" % (label, where), r)
    # A folder holding a shard whose name has '%': refused over posix (its listing) and http (its index).
    pct = os.path.join(t.work, "pct")
    shutil.copytree(model, pct)
    rename_shard(pct, shards[0], "a%41.safetensors")
    r = t.generate(pct, True, "bad.json")
    check(r.code == 2 and "shard 'a%41.safetensors' is not a plain file name" in r.err,
          "a listed shard with '%': expected exit 2 naming the folder and the name", r)
    r = t.generate(base + "/pct/", True, "bad.json", storage="http")
    check(r.code == 2 and "shard 'a%41.safetensors' is not a plain .safetensors file name" in r.err,
          "an index naming a shard with '%' over http: expected exit 2 naming it", r)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--exe", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--case", required=True, choices=["nginx", "transient", "permanent", "secret", "tiered", "tls",
                                                     "validators", "redirect", "deadline", "interrupt", "killed",
                                                     "names", "chat-interrupt", "serve-interrupt"])
    a = p.parse_args()
    if shutil.which("nginx") is None and not os.access("/usr/sbin/nginx", os.X_OK) and a.case in ("nginx", "names"):
        print("SKIP: nginx is not installed")
        return 77
    t = Test(a)
    try:
        globals()["case_" + a.case.replace("-", "_")](t)
    except Failure as e:
        print("FAILED: %s" % e, file=sys.stderr)
        return 1
    finally:
        t.close()
    shutil.rmtree(t.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
