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
Exit 77 (skipped) when nginx is not installed. Servers listen on 127.0.0.1 only, and stop
with the test (or after their lifetime).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
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

    def fault_server(self, root, fault, target, times, extra=()):
        port_file = os.path.join(self.work, "fault.port")
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--exe", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--case", required=True, choices=["nginx", "transient", "permanent", "secret", "tiered", "tls"])
    a = p.parse_args()
    if shutil.which("nginx") is None and not os.access("/usr/sbin/nginx", os.X_OK) and a.case == "nginx":
        print("SKIP: nginx is not installed")
        return 77
    t = Test(a)
    try:
        globals()["case_" + a.case](t)
    except Failure as e:
        print("FAILED: %s" % e, file=sys.stderr)
        return 1
    finally:
        t.close()
    shutil.rmtree(t.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
