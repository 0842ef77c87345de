#!/usr/bin/python3
"""Serves a folder over loopback HTTP with nginx, unprivileged, for the http storage tests.

  run_nginx.py --root DIR --prefix PREFIX --port-file FILE [--lifetime SECONDS]

Writes PREFIX/nginx.conf (pid, logs and temp paths inside PREFIX), starts nginx in the
foreground on 127.0.0.1 and a free port, and writes that port to FILE once nginx answers.
DIR is served at /m/ (nginx answers Range requests natively, with ETag and Last-Modified),
and at /slow/ over a slow link (limit_rate 1 MB/s per connection);
--tls CERT KEY serves https with HTTP/2 offered; --directio makes nginx read with O_DIRECT, as the `direct` backend does (benchmarks).
nginx is stopped when this launcher gets SIGTERM, when its parent exits, or after
--lifetime seconds: it never outlives the test. Exit 77 when nginx is not installed.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

CONF = """worker_processes 2;
daemon off;
error_log {prefix}/error.log warn;
pid {prefix}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/tmp;
  proxy_temp_path {prefix}/tmp;
  fastcgi_temp_path {prefix}/tmp;
  uwsgi_temp_path {prefix}/tmp;
  scgi_temp_path {prefix}/tmp;
  sendfile on;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{port}{tls};
    location /m/ {{ alias {root}/;{directio} }}
    location /slow/ {{ alias {root}/; limit_rate 1m; }}
  }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--lifetime", type=float, default=900.0)
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"),
                   help="serve https (and HTTP/2 over TLS) with this certificate and key (PEM)")
    p.add_argument("--directio", action="store_true",
                   help="nginx reads files with O_DIRECT (directio 4k): no byte from the page cache (benchmarks)")
    args = p.parse_args()
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if nginx is None:
        print("SKIP: nginx is not installed", file=sys.stderr)
        return 77
    prefix = os.path.abspath(args.prefix)
    os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)
    parent = os.getppid()
    for attempt in range(5):  # a port taken between the probe and nginx's bind: try another
        port = free_port()
        conf = os.path.join(prefix, "nginx.conf")
        with open(conf, "w") as f:
            f.write(CONF.format(prefix=prefix, port=port, root=os.path.abspath(args.root),
                                directio=" directio 4k; directio_alignment 4k; aio threads; output_buffers 2 1m;"
                                if args.directio else "",
                                tls=(" ssl http2;\n    ssl_certificate %s;\n    ssl_certificate_key %s" %
                                     (os.path.abspath(args.tls[0]), os.path.abspath(args.tls[1]))) if args.tls else ""))
        child = subprocess.Popen([nginx, "-p", prefix, "-c", conf, "-e", os.path.join(prefix, "error.log")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        up = False
        for _ in range(100):  # at most 5 s
            if child.poll() is not None:
                break
            try:
                if args.tls:  # nginx answers once it accepts connections
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                else:
                    urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=1)
                up = True
            except urllib.error.HTTPError:
                up = True  # 404 for /: nginx answers
            except OSError:
                time.sleep(0.05)
            if up:
                break
        if up:
            break
        if child.poll() is None:
            child.kill()
        child.wait()
    else:
        print("nginx did not start; see %s/error.log" % prefix, file=sys.stderr)
        return 1

    def stop(*_):
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                child.kill()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, args.port_file)
    end = time.monotonic() + args.lifetime
    while time.monotonic() < end and os.getppid() == parent and child.poll() is None:
        time.sleep(0.2)
    stop()


if __name__ == "__main__":
    sys.exit(main())
