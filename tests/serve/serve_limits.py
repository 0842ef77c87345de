#!/usr/bin/env python3
"""`k3host serve` at the HTTP layer, with raw sockets and http.client (the standard library
only): what a client meets before any route or API key (docs/serve.md, "Limits before the
API key"), the options' ranges, the bind, disconnects and half-closed clients, IPv6.

    serve_limits.py --exe K3HOST --src SOURCE_DIR --work SCRATCH --case NAME

Cases: slowloris, headers, nesting, nobody, framing, bind, options, disconnect, ipv6,
pipeline-files. Each starts its own servers on free loopback ports on the tiny checkpoint
and stops them with SIGINT (asserting exit 0). Exit 0 pass, 1 fail, 77 skipped.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--exe", required=True)
ap.add_argument("--src", required=True)
ap.add_argument("--work", required=True)
ap.add_argument("--case", required=True)
args = ap.parse_args()
args.work = os.path.abspath(args.work)

servers = []
KEY = "sk-limits-test-%d" % os.getpid()


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    for s in servers:
        print("--- server %s stderr:\n%s" % (s.name, s.stderr()[-6000:]), file=sys.stderr)
        s.proc.kill()
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Server:
    def __init__(self, name, proc):
        self.name, self.proc, self.port, self.host = name, proc, 0, "127.0.0.1"
        self._err = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in iter(self.proc.stderr.readline, b""):
            self._err.append(line.decode("utf-8", "replace"))

    def stderr(self):
        return "".join(self._err)

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def make_model():
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    model = os.path.join(args.work, "model")
    r = subprocess.run([args.exe, "make-model", "-g", os.path.join(args.src, "configs/models/tiny.yaml"), "-o", model],
                       capture_output=True, text=True)
    check(r.returncode == 0, "make-model failed: " + r.stderr)
    return model


def serve_argv(model, extra):
    return [args.exe, "serve", "--config", os.path.join(args.src, "configs/default.yaml"), "--set", "model.path=" + model,
            "--set", "model.generate_if_missing=false", "--set", "memory.context=2048", "--set", "threads=1",
            "--port", "0"] + extra


def start_server(name, model, extra=(), key=None, wait_healthy=True):
    env = dict(os.environ)
    env.pop("K3_API_KEY", None)
    if key:
        env["K3_API_KEY"] = key
    argv = serve_argv(model, list(extra))
    if "--port" in extra:  # the case names its own port
        i = argv.index("--port")
        del argv[i:i + 2]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    s = Server(name, proc)
    servers.append(s)
    deadline = time.time() + 60
    while time.time() < deadline:
        m = re.search(r"listening on http://(\[[0-9a-f:]+\]|[0-9.]+):(\d+)", s.stderr())
        if m:
            s.host, s.port = m.group(1).strip("[]"), int(m.group(2))
            break
        if proc.poll() is not None:
            fail("server %s exited early with %s" % (name, proc.returncode))
        time.sleep(0.05)
    check(s.port > 0, "server %s printed no port" % name)
    while wait_healthy and time.time() < deadline:
        status, _, _ = get(s, "/health")
        if status == 200:
            return s
        time.sleep(0.05)
    if wait_healthy:
        fail("server %s never became healthy" % name)
    return s


def stop_server(s):
    s.proc.send_signal(signal.SIGINT)
    try:
        code = s.proc.wait(20)
    except subprocess.TimeoutExpired:
        fail("server %s did not stop within 20 s of SIGINT" % s.name)
    check(code == 0, "server %s exit code %s after SIGINT, expected 0" % (s.name, code))
    servers.remove(s)


def conn(s, timeout=60):
    return http.client.HTTPConnection(s.host, s.port, timeout=timeout)


def get(s, path, headers=None):
    try:
        c = conn(s, 10)
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body, r
    except OSError as e:
        return 0, str(e).encode(), None


def post(s, path, body, headers=None, timeout=120):
    c = conn(s, timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, body=body.encode() if isinstance(body, str) else body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def metric(s, name, key=None):
    status, body, _ = get(s, "/metrics", {"Authorization": "Bearer " + key} if key else None)
    check(status == 200, "/metrics: %s %r" % (status, body[:200]))
    m = re.search(r"^%s (\S+)$" % re.escape(name), body.decode(), re.M)
    check(m, "/metrics has no " + name)
    return float(m.group(1))


def raw(s, data, source=None, read=True, timeout=10, shut=False):
    """Sends bytes on a fresh connection; returns what came back until the server closed."""
    sk = socket.create_connection((s.host, s.port), timeout=timeout, source_address=(source, 0) if source else None)
    try:
        sk.sendall(data)
        if shut:
            sk.shutdown(socket.SHUT_WR)
        out = b""
        while read:
            try:
                chunk = sk.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        sk.close()


def status_of(response):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", response)
    return int(m.group(1)) if m else 0


def error_of(response):
    body = response.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in response else b""
    try:
        return json.loads(body)["error"]
    except (ValueError, KeyError):
        return None


def dechunk(response):
    """The body of a chunked response (what arrived of it)."""
    rest = response.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in response else b""
    out = b""
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        n = int(size_line, 16) if size_line else 0
        if n == 0:
            break
        out += rest[:n]
        rest = rest[n + 2:]
    return out


def check_refusal(response, status, code, what):
    check(status_of(response) == status, "%s: status %s, expected %s: %r" % (what, status_of(response), status, response[:300]))
    e = error_of(response)
    check(e is not None and e.get("code") == code and e.get("message"),
          "%s: not an OpenAI error object with code %s: %r" % (what, code, response[:300]))


CONVERSATION = [{"role": "user", "content": "Name three primary colors."}]
SLOW_STORAGE = ["--set", "storage.plugin=throttle", "--set", "storage.params.latency_us=3000",
                "--set", "memory.trunk_gb=0.00005", "--set", "memory.expert_cache_gb=0.00005"]

# ---------------------------------------------------------------------------------------


def case_slowloris(model):
    """Slow clients hold neither a thread nor the API: 12 send one header line every 0.5 s
    (the old per-read timeout never fires) from 127.0.0.2; only 4 are let in (per address),
    and those are cut when the whole header has not arrived within 2 s, while a client from
    another address is served at once. The total limit refuses the connection over it."""
    s = start_server("slowloris", model, ["--header-timeout", "2", "--max-client-connections", "4",
                                          "--max-connections", "12"], key=KEY)
    slow = []
    for i in range(12):
        sk = socket.create_connection((s.host, s.port), timeout=10, source_address=("127.0.0.2", 0))
        sk.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        slow.append(sk)
    t0 = time.time()
    # The connections over the per-address limit are answered 429 and closed at once.
    refused = 0
    for sk in slow[4:]:
        sk.settimeout(5)
        try:
            data = sk.recv(65536)
        except (ConnectionResetError, socket.timeout):
            data = b""
        if status_of(data) == 429:
            refused += 1
    check(refused == 8, "%d of the 8 connections over the per-address limit were refused with 429" % refused)
    # Another address is served while the slow ones trickle, and the key is checked as usual.
    t1 = time.time()
    status, _, _ = get(s, "/health")
    check(status == 200 and time.time() - t1 < 1.5, "/health during the slow clients: %s after %.1f s" % (status, time.time() - t1))
    status, _, _ = get(s, "/v1/models", {"Authorization": "Bearer " + KEY})
    check(status == 200, "/v1/models with the key during the slow clients: %s" % status)
    status, _, _ = get(s, "/v1/models")
    check(status == 401, "/v1/models without the key: %s" % status)
    # The 4 let in keep sending a line every 0.5 s; the header deadline (2 s) cuts them.
    alive = slow[:4]
    for sk in alive:
        sk.setblocking(False)
    cut = set()
    while time.time() - t0 < 8 and len(cut) < 4:
        for i, sk in enumerate(alive):
            if i in cut:
                continue
            try:
                sk.sendall(b"X-Slow-%d: %d\r\n" % (i, int(time.time() * 1000)))
                if sk.recv(65536) == b"":
                    cut.add(i)
            except BlockingIOError:
                pass
            except OSError:
                cut.add(i)
        time.sleep(0.5)
    elapsed = time.time() - t0
    check(len(cut) == 4, "%d of the 4 slow connections were cut within 8 s" % len(cut))
    check(elapsed >= 1.5, "the slow connections were cut after %.1f s, before the 2 s header deadline" % elapsed)
    for sk in slow:
        sk.close()
    # The total limit: 12 connections open at once from 12 addresses, the 13th refused.
    time.sleep(0.3)
    idle = [socket.create_connection((s.host, s.port), timeout=10, source_address=("127.0.1.%d" % (i + 1), 0))
            for i in range(12)]
    time.sleep(0.3)
    over = raw(s, b"", source="127.0.2.1", timeout=5)
    check(status_of(over) == 503, "the connection over --max-connections: %r" % over[:200])
    for sk in idle:
        sk.close()
    time.sleep(0.3)
    status, _, _ = get(s, "/health")
    check(status == 200, "/health after the idle connections closed: %s" % status)
    stop_server(s)


def case_headers(model):
    """Header size and count are bounded before anything else: 64 MB of header lines are cut
    after the first 16 kB (the server's memory does not grow), one 20 kB field and 150
    small fields get 431."""
    s = start_server("headers", model, key=KEY)
    rss0 = s.rss_kb()
    sk = socket.create_connection((s.host, s.port), timeout=10)
    sk.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    line = b"X-Pad: " + b"a" * 1017 + b"\r\n"
    sent = 0
    reply = b""
    try:
        while sent < 64 << 20:
            sk.sendall(line * 64)
            sent += len(line) * 64
    except OSError:
        pass
    try:
        sk.settimeout(5)
        while True:
            chunk = sk.recv(65536)
            if not chunk:
                break
            reply += chunk
    except OSError:
        pass
    sk.close()
    check(sent < 8 << 20, "the server took %d bytes of header lines without cutting the connection" % sent)
    if reply:
        check_refusal(reply, 431, "request_header_fields_too_large", "64 MB of headers")
    time.sleep(0.2)
    grown = s.rss_kb() - rss0
    check(grown < 32 * 1024, "the server's RSS grew by %d kB on a header flood" % grown)
    big = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20000 + b"\r\n\r\n"
    check_refusal(raw(s, big), 431, "request_header_fields_too_large", "one 20 kB header field")
    many = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-F%d: v\r\n" % i for i in range(150)) + b"\r\n"
    check_refusal(raw(s, many), 431, "request_header_fields_too_large", "150 header fields")
    ok = b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-F%d: v\r\n" % i for i in range(50)) + b"Connection: close\r\n\r\n"
    check(status_of(raw(s, ok)) == 200, "50 header fields are fine")
    status, _, _ = get(s, "/health")
    check(status == 200, "/health after the header cases: %s" % status)
    stop_server(s)


def nested(depth):
    return "[" * depth + "]" * depth


def case_nesting(model):
    """JSON nested without bound is refused before it is parsed: a tool's parameters 60,000
    levels deep (which overflowed the serializer's stack), a tool call's arguments text, a
    completions body; max_tokens beyond int64 names its real bound."""
    s = start_server("nesting", model, ["--max-body", "4194304"])
    deep = '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":' \
           '{"type":"object","properties":{"x":%s}}}}]}' % nested(60000)
    status, body = post(s, "/v1/chat/completions", deep)
    e = json.loads(body).get("error", {}) if body.startswith(b"{") else {}
    check(status == 400 and e.get("code") == "invalid_json" and "64 levels" in e.get("message", ""),
          "tools nested 60,000 levels: %s %r" % (status, body[:300]))
    args_deep = json.dumps({"messages": [{"role": "user", "content": "hi"},
                                         {"role": "assistant", "content": None, "tool_calls": [
                                             {"id": "c", "type": "function",
                                              "function": {"name": "f", "arguments": '{"a":' + nested(100) + "}"}}]}]})
    status, body = post(s, "/v1/chat/completions", args_deep)
    e = json.loads(body).get("error", {})
    check(status == 400 and e.get("param") == "messages[1].tool_calls[0].function.arguments",
          "tool call arguments nested 100 levels: %s %r" % (status, body[:300]))
    status, body = post(s, "/v1/completions", '{"prompt":"hi","user":' + nested(65) + "}")
    check(status == 400 and json.loads(body)["error"]["code"] == "invalid_json", "a body 65 levels deep: %s %r" % (status, body[:300]))
    # 64 levels are fine (the refusal is then for the unknown value, not the depth).
    status, body = post(s, "/v1/completions", '{"prompt":"hi","max_tokens":1,"temperature":0,"user_data":' + nested(63) + "}")
    check(status == 400 and json.loads(body)["error"]["param"] == "user_data", "a body 64 levels deep: %s %r" % (status, body[:300]))
    status, body = post(s, "/v1/completions", '{"prompt":"hi","max_tokens":9223372036854775808}')
    e = json.loads(body)["error"]
    check(status == 400 and e["param"] == "max_tokens" and "9223372036854775807" in e["message"],
          "max_tokens 2^63: %s %r" % (status, body[:300]))
    status, body = post(s, "/v1/completions", '{"prompt":"hi","max_tokens":9223372036854775807,"temperature":0}')
    check(status == 200, "max_tokens 2^63-1 (capped by the context): %s %r" % (status, body[:300]))
    status, _, _ = get(s, "/health")
    check(status == 200, "/health after the nested bodies: %s" % status)
    stop_server(s)


def case_nobody(model):
    """A POST without a body is answered at once (411), not after the read timeout."""
    s = start_server("nobody", model, ["--read-timeout", "30"])
    t = time.time()
    sk = socket.create_connection((s.host, s.port), timeout=10)
    sk.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n")
    reply = sk.recv(65536)
    sk.close()
    check(time.time() - t < 3, "the POST without a body was answered after %.1f s" % (time.time() - t))
    check_refusal(reply, 411, "length_required", "a POST without a body")
    reply = raw(s, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    check_refusal(reply, 400, "invalid_json", "a POST with Content-Length: 0")
    stop_server(s)


def case_framing(model):
    """Where a body ends must be certain: conflicting Content-Lengths and transfer codings
    other than chunked are refused (400), a chunked body is read within --max-body, and
    Expect: 100-continue is honoured."""
    s = start_server("framing", model, ["--max-body", "4096"])
    body = b'{"prompt":"hi","max_tokens":1,"temperature":0}'
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
    r = raw(s, head + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(body), len(body) + 5) + body)
    check_refusal(r, 400, "bad_content_length", "two different Content-Lengths")
    r = raw(s, head + b"Content-Length: %d, %d\r\n\r\n" % (len(body), len(body) + 1) + body)
    check_refusal(r, 400, "bad_content_length", "a Content-Length list of two values")
    for te in (b"gzip", b"gzip, chunked", b"chunked, gzip", b"identity", b"x-unknown"):
        r = raw(s, head + b"Transfer-Encoding: " + te + b"\r\n\r\n" + body)
        check_refusal(r, 400, "bad_transfer_encoding", "Transfer-Encoding: " + te.decode())
    for both in (b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(body),
                 b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(body)):
        r = raw(s, head + both + b"\r\n" + body)
        check(status_of(r) == 400 and (error_of(r) or {}).get("code") in ("bad_transfer_encoding", "bad_content_length"),
              "Transfer-Encoding with a Content-Length: %r" % r[:300])
    r = raw(s, head + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + b"0\r\n\r\n")
    check(status_of(r) == 400, "Transfer-Encoding twice: %r" % r[:200])
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    r = raw(s, head + b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
    check(status_of(r) == 200 and b"text_completion" in r, "a chunked body: %r" % r[:300])
    big = b'{"prompt":"' + b"x" * 5000 + b'"}'
    r = raw(s, head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big))
    check_refusal(r, 413, "request_too_large", "a chunked body over --max-body")
    # Expect: 100-continue: the interim answer first, then the body is read and answered.
    sk = socket.create_connection((s.host, s.port), timeout=10)
    sk.sendall(head + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
    interim = sk.recv(65536)
    check(interim.startswith(b"HTTP/1.1 100 Continue"), "Expect: 100-continue: %r" % interim[:100])
    sk.sendall(body)
    r = b""
    while True:
        chunk = sk.recv(65536)
        if not chunk:
            break
        r += chunk
    sk.close()
    check(status_of(r) == 200, "after 100 Continue: %r" % r[:200])
    stop_server(s)


def case_bind(model):
    """A second server on a port in use exits 1 naming it, instead of sharing the port
    (SO_REUSEPORT would let the kernel split the clients between the two)."""
    a = start_server("first", model)
    r = subprocess.run(serve_argv(model, []) [:-2] + ["--port", str(a.port)], capture_output=True, text=True, timeout=60)
    check(r.returncode == 1, "a second server on port %d: exit %s\n%s" % (a.port, r.returncode, r.stderr[-2000:]))
    check("address in use" in r.stderr and str(a.port) in r.stderr, "the message names the address: " + r.stderr[-2000:])
    status, _, _ = get(a, "/health")
    check(status == 200, "the first server after the second tried: %s" % status)
    stop_server(a)


def case_options(model):
    """Every numeric option is checked before the server binds: exit 2 naming the flag."""
    bad = [
        (["--queue", "1000000"], "--queue"), (["--queue", "-1"], "--queue"),
        (["--request-timeout", "1e10"], "--request-timeout"), (["--request-timeout", "inf"], "--request-timeout"),
        (["--request-timeout", "nan"], "--request-timeout"), (["--request-timeout", "0"], "--request-timeout"),
        (["--read-timeout", "nan"], "--read-timeout"), (["--write-timeout", "-1"], "--write-timeout"),
        (["--header-timeout", "1e300"], "--header-timeout"), (["--max-body", "0"], "--max-body"),
        (["--max-body", "-5"], "--max-body"), (["--max-tokens", "0"], "--max-tokens"),
        (["--max-tokens", "99999999999"], "--max-tokens"), (["--port", "70000"], "--port"),
        (["--snapshot-budget-mb", "nan"], "--snapshot-budget-mb"), (["--snapshot-budget-mb", "1e30"], "--snapshot-budget-mb"),
        (["--snapshot-interval", "0"], "--snapshot-interval"), (["--max-header-bytes", "10"], "--max-header-bytes"),
        (["--max-headers", "0"], "--max-headers"), (["--max-connections", "0"], "--max-connections"),
        (["--max-client-connections", "300"], "--max-client-connections"),
    ]
    for extra, flag in bad:
        argv = serve_argv(model, extra)
        if flag == "--port":
            i = argv.index("--port")
            del argv[i:i + 2]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            fail("serve %s did not exit (it served)" % " ".join(extra))
        check(r.returncode == 2 and flag in r.stderr and "listening" not in r.stderr,
              "serve %s: exit %s, expected 2 naming %s:\n%s" % (" ".join(extra), r.returncode, flag, r.stderr[-1500:]))
    # The largest values in range are accepted and served with.
    s = start_server("bounds", model, ["--queue", "256", "--request-timeout", "604800", "--max-tokens", "1048576"])
    status, body = post(s, "/v1/completions", '{"prompt":"hi","max_tokens":3,"temperature":0}')
    check(status == 200 and json.loads(body)["usage"]["completion_tokens"] >= 1, "a reply at the largest timeout: %r" % body[:300])
    check(json.loads(body)["usage"]["completion_tokens"] == 3 or json.loads(body)["choices"][0]["finish_reason"] == "stop",
          "the largest request timeout cut the reply: %r" % body[:300])
    stop_server(s)


def long_prompt(s):
    """A completions prompt (ids) that runs to max_tokens: found, not assumed."""
    for seed in range(1, 21):
        prompt = [(seed * 37 + i * 11) % 500 for i in range(8)]
        status, body = post(s, "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": 24, "temperature": 0}))
        if status == 200 and json.loads(body)["choices"][0]["finish_reason"] == "length":
            return prompt
    fail("no prompt ran to max_tokens")


def wait_interrupted(s, before):
    for _ in range(200):
        now = metric(s, "k3_requests_interrupted_total")
        if now > before:
            return now
        time.sleep(0.05)
    return metric(s, "k3_requests_interrupted_total")


def case_disconnect(model):
    """A client that goes away stops its generation; one that only closed its sending side
    gets its whole reply."""
    s = start_server("disconnect", model, SLOW_STORAGE)
    prompt = long_prompt(s)
    # Half-closed: the whole plain reply, then the whole stream.
    body = json.dumps({"prompt": prompt, "max_tokens": 24, "temperature": 0}).encode()
    req = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    r = raw(s, req + body, shut=True, timeout=60)
    check(status_of(r) == 200, "half-closed plain request: %r" % r[:300])
    reply = json.loads(dechunk(r))  # spaces before the JSON, if any, are allowed
    check(reply["usage"]["completion_tokens"] == 24, "half-closed plain request: %r" % reply)
    body_s = json.dumps({"prompt": prompt, "max_tokens": 24, "temperature": 0, "stream": True}).encode()
    req_s = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body_s)
    r = raw(s, req_s + body_s, shut=True, timeout=60)
    check(status_of(r) == 200 and b"data: [DONE]" in r, "half-closed stream: %r" % r[-300:])

    # Gone: a plain and a streamed request of 1500 tokens, the socket closed after the
    # reply began; each generation ends long before 1500 tokens.
    for stream in (False, True):
        before = metric(s, "k3_requests_interrupted_total")
        generated = metric(s, "k3_generated_tokens_total")
        body = json.dumps({"prompt": prompt, "max_tokens": 1500, "temperature": 0, "stream": stream}).encode()
        sk = socket.create_connection((s.host, s.port), timeout=30)
        sk.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(body) + body)
        first = sk.recv(65536)
        check(status_of(first) == 200, "the long request began: %r" % first[:200])
        for _ in range(200):
            if metric(s, "k3_generation_running") == 1:
                break
            time.sleep(0.02)
        time.sleep(0.5)
        sk.shutdown(socket.SHUT_RDWR)  # a FIN, as a client that exits sends
        sk.close()
        after = wait_interrupted(s, before)
        check(after == before + 1, "stream=%s: closing the connection did not end the generation (%s -> %s)" % (stream, before, after))
        ran = metric(s, "k3_generated_tokens_total") - generated
        check(ran < 1500, "stream=%s: the generation ran on after the client left: %d tokens" % (stream, ran))
    status, body = post(s, "/v1/completions", json.dumps({"prompt": prompt, "max_tokens": 2, "temperature": 0}))
    check(status == 200, "the next request is served: %s" % status)
    stop_server(s)


def case_ipv6(model):
    """--host [::1] (and ::1) binds the IPv6 loopback and prints the URL with brackets."""
    try:
        probe = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        print("SKIP: no IPv6 loopback here")
        sys.exit(77)
    for host in ("[::1]", "::1"):
        s = start_server("ipv6", model, ["--host", host])
        check(re.search(r"listening on http://\[::1\]:%d" % s.port, s.stderr()), "the URL has brackets: " + s.stderr()[:500])
        check(s.host == "::1", "bound %s" % s.host)
        status, body, _ = get(s, "/v1/models")
        check(status == 200 and b'"object":"list"' in body, "/v1/models over ::1: %s %r" % (status, body[:200]))
        stop_server(s)


def case_pipeline_files(model):
    """The batch job's files in the pipeline (trace.out, job.report, ...) are not written by
    the server, and it says so when it starts."""
    trace = os.path.join(args.work, "trace.bin")
    report = os.path.join(args.work, "report.json")
    s = start_server("files", model, ["--set", "trace.out=" + trace, "--set", "job.report=" + report])
    status, _ = post(s, "/v1/completions", '{"prompt":"hi","max_tokens":2,"temperature":0}')
    check(status == 200, "a request: %s" % status)
    line = [l for l in s.stderr().splitlines() if "not used by the server" in l]
    check(line and "trace.out (" + trace in line[0] and "job.report (" + report in line[0],
          "the start-up log names the files it does not write: " + s.stderr()[:1500])
    stop_server(s)
    check(not os.path.exists(trace) and not os.path.exists(report), "a file the server says it does not write exists")


CASES = {"slowloris": case_slowloris, "headers": case_headers, "nesting": case_nesting, "nobody": case_nobody,
         "framing": case_framing, "bind": case_bind, "options": case_options, "disconnect": case_disconnect,
         "ipv6": case_ipv6, "pipeline-files": case_pipeline_files}
check(args.case in CASES, "unknown case " + args.case)
watchdog = threading.Timer(240, lambda: (print("FAIL: the case took longer than 240 s", file=sys.stderr),
                                         [s.proc.kill() for s in servers], os._exit(1)))
watchdog.daemon = True
watchdog.start()
model_dir = make_model()
try:
    CASES[args.case](model_dir)
except (OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
    fail("%s: %r" % (type(e).__name__, e))
finally:
    for srv in list(servers):
        srv.proc.kill()
shutil.rmtree(args.work, ignore_errors=True)
print("serve limits %s: passed" % args.case)
os._exit(0)
