#!/usr/bin/python3
"""A range-serving HTTP server for the http storage tests that injects one kind of fault.

Serves the files of --root (GET with one "Range: bytes=a-b", like nginx: 206 with
Content-Range, an ETag and Last-Modified). Requests whose range overlaps the target region
get the fault --fault, the first --times of them (-1: every one):

  500        HTTP 500
  reset      headers, half the body, then a TCP reset
  stall      headers, half the body, then silence for --stall-seconds
  truncate   a 206 whose Content-Length and body hold half the range
  badrange   a 206 whose Content-Range names another range
  norange    200 with the whole file (Range ignored)
  etag       the right bytes under another ETag
  hang       reads the request, answers nothing for --stall-seconds (a server that accepts
             and then stalls); touches --hang-marker when it starts
  die        the server exits at once (a server killed mid-run)

Faults that change what every answer of a file carries ("the opening answer" is the one to
"Range: bytes=0-0", what open() asks; --target does not apply):
  novalidators  neither ETag nor Last-Modified on any answer
  lm-only       Last-Modified and no ETag on every answer
  lm-first      Last-Modified, no ETag, on the opening answers only
  lm-change     no ETag, and another Last-Modified on every answer but the opening ones
  swap          answers but the opening ones for --swap-name come from --swap-with (another
                file's bytes, with that file's ETag and Last-Modified)

--target: "experts" (bytes of tensors named *.experts.*), "trunk" (bytes of every other
tensor) or "all" (any range request). Safetensors headers are parsed to find the regions.
--armed-by-experts: the fault applies only once an expert's bytes were asked for (the run
is generating, not loading).
--require-auth-env NAME: 401 unless "Authorization: Bearer $NAME" is sent.
--redirect-to BASE: every request is answered 302 to BASE + its path, except one whose path
starts with /r/, served from --root with /r stripped (so BASE "/r" redirects to this server).
--record-headers FILE: one JSON line per request: its path and its headers.
Only loopback: binds 127.0.0.1 on a free port, written to --port-file once listening.
Stops by itself after --lifetime seconds (and when its parent test is gone).
"""
import argparse
import email.utils
import http.server
import json
import os
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse

PER_FILE_FAULTS = ("novalidators", "lm-only", "lm-first", "lm-change", "swap")


def tensor_regions(path, want_experts):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    base = 8 + n
    out = []
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if (".experts." in name) == want_experts:
            a, b = t["data_offsets"]
            if b > a:
                out.append((base + a, base + b))
    return out


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.faulted = 0
        self.regions = {}
        self.experts_seen = False
        self.expert_regions = {}

    def regions_of(self, path):
        if path not in self.regions:
            t = self.args.target
            if t == "all":
                self.regions[path] = None
            elif path.endswith(".safetensors"):
                self.regions[path] = tensor_regions(path, t == "experts")
            else:
                self.regions[path] = []
        return self.regions[path]

    def note_experts(self, path, first, last):
        if not path.endswith(".safetensors"):
            return
        if path not in self.expert_regions:
            self.expert_regions[path] = tensor_regions(path, True)
        if any(a <= last and first < b for a, b in self.expert_regions[path]):
            self.experts_seen = True

    def should_fault(self, path, first, last):
        if self.args.fault in PER_FILE_FAULTS:
            return False
        if self.args.armed_by_experts:
            self.note_experts(path, first, last)
            if not self.experts_seen:
                return False
        regions = self.regions_of(path)
        if regions is not None and not any(a <= last and first < b for a, b in regions):
            return False
        with self.lock:
            if self.args.times >= 0 and self.faulted >= self.args.times:
                return False
            self.faulted += 1
            return True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes

    def log_message(self, fmt, *a):  # quiet
        pass

    def do_GET(self):
        st = self.server.state
        if st.args.record_headers:
            with st.lock, open(st.args.record_headers, "a") as f:
                f.write(json.dumps({"path": self.path, "headers": dict(self.headers.items())}) + "\n")
        if st.args.require_auth_env and self.headers.get("Authorization") != "Bearer " + os.environ.get(
                st.args.require_auth_env, ""):
            self.send_error_body(401)
            return
        url_path = urllib.parse.unquote(self.path.split("?")[0])
        if url_path.startswith("/r/"):
            url_path = url_path[2:]
        elif st.args.redirect_to:
            self.send_response(302)
            self.send_header("Location", st.args.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = os.path.normpath(os.path.join(st.args.root, url_path.lstrip("/")))
        if not path.startswith(os.path.abspath(st.args.root)) or not os.path.isfile(path):
            self.send_error_body(404)
            return
        opening = self.headers.get("Range", "") == "bytes=0-0"  # what open() asks
        if st.args.fault == "swap" and not opening and os.path.basename(path) == st.args.swap_name:
            path = st.args.swap_with
        size = os.path.getsize(path)
        mtime = os.path.getmtime(path)
        etag = '"%x-%x"' % (int(mtime), size)
        self.validators = self.per_file_validators(mtime, opening)
        rng = self.headers.get("Range", "")
        if not rng.startswith("bytes=") or "," in rng:
            self.send_whole(path, size, etag, mtime)
            return
        a, _, b = rng[6:].partition("-")
        first = int(a)
        last = min(int(b) if b else size - 1, size - 1)
        if first >= size:
            self.send_response(416)
            self.send_header("Content-Range", "bytes */%d" % size)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        fault = st.args.fault if st.should_fault(path, first, last) else None
        if fault == "die":
            os._exit(0)
        if fault == "hang":
            if st.args.hang_marker:
                open(st.args.hang_marker, "w").close()
            time.sleep(st.args.stall_seconds)
            self.close_connection = True
            return
        if fault == "500":
            self.send_error_body(500)
            return
        if fault == "norange":
            self.send_whole(path, size, etag, mtime)
            return
        with open(path, "rb") as f:
            f.seek(first)
            body = f.read(last - first + 1)
        shown = (first, last)
        if fault == "badrange":
            shown = (first + 1, last + 1)
        if fault == "etag":
            etag = '"changed-%x"' % size
        length = len(body)
        if fault == "truncate":
            body = body[: len(body) // 2]
            length = len(body)
        self.send_response(206)
        self.send_header("Content-Range", "bytes %d-%d/%d" % (shown[0], shown[1], size))
        self.send_header("Content-Length", str(length))
        self.send_validators(etag)
        self.end_headers()
        if fault in ("reset", "stall"):
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            if fault == "stall":
                time.sleep(st.args.stall_seconds)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        self.wfile.write(body)

    def per_file_validators(self, mtime, opening):
        """(whether the ETag is sent, the Last-Modified sent or None) for this answer."""
        lm = email.utils.formatdate(mtime, usegmt=True)
        fault = self.server.state.args.fault
        if fault == "novalidators":
            return False, None
        if fault == "lm-only":
            return False, lm
        if fault == "lm-first":
            return False, (lm if opening else None)
        if fault == "lm-change":
            return False, (lm if opening else email.utils.formatdate(mtime + 3600, usegmt=True))
        return True, lm

    def send_validators(self, etag):
        send_etag, lm = self.validators
        if send_etag:
            self.send_header("ETag", etag)
        if lm is not None:
            self.send_header("Last-Modified", lm)

    def send_whole(self, path, size, etag, mtime):
        with open(path, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.send_validators(etag)
        self.end_headers()
        self.wfile.write(body)

    def send_error_body(self, code):
        body = b"error\n"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # the client went away (a reset, or k3host done): expected here
        super().handle_error(request, client_address)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--fault", default="none",
                   choices=["none", "500", "reset", "stall", "truncate", "badrange", "norange", "etag", "hang", "die",
                            *PER_FILE_FAULTS])
    p.add_argument("--target", default="all", choices=["all", "experts", "trunk"])
    p.add_argument("--times", type=int, default=-1)
    p.add_argument("--stall-seconds", type=float, default=4.0)
    p.add_argument("--require-auth-env", default="",
                   help="answer 401 unless Authorization is 'Bearer <value of this variable>'")
    p.add_argument("--lifetime", type=float, default=300.0)
    p.add_argument("--armed-by-experts", action="store_true")
    p.add_argument("--hang-marker", default="")
    p.add_argument("--redirect-to", default="")
    p.add_argument("--record-headers", default="")
    p.add_argument("--swap-name", default="")
    p.add_argument("--swap-with", default="")
    args = p.parse_args()
    args.root = os.path.abspath(args.root)
    server = Server(("127.0.0.1", 0), Handler)
    server.state = State(args)
    parent = os.getppid()

    def watchdog():
        end = time.monotonic() + args.lifetime
        while time.monotonic() < end and os.getppid() == parent:
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
