#!/usr/bin/env python3
"""Every JSON file k3host reads is refused when it nests deeper than 64 levels, with exit 2
and a message that names the file (sdk/k3/json_depth.hpp, docs/architecture.md "Bad
input"): config.json, the index JSON, a shard's header, tokenizer_config.json (the
tiktoken plugin), a packed trunk's trunk.json, a chat history record. Each file of the tiny
checkpoint gets a key whose value nests 100 levels (a depth the parsers themselves take)
and k3host is run on it.

usage: json_depth_files.py K3HOST SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

DEEP = "[" * 100 + "]" * 100
MESSAGE = "JSON nested deeper than 64 levels"


def fail(message, proc=None):
    if proc is not None:
        message += "\n--- exit %s\n--- stderr:\n%s" % (proc.returncode, proc.stderr[-3000:])
    sys.exit("FAIL: " + message)


def add_deep_key(path):
    with open(path) as f:
        j = json.load(f)
    text = json.dumps(j)
    assert text.startswith("{")
    with open(path, "w") as f:
        f.write('{"k3_deep": ' + DEEP + ", " + text[1:])


def main():
    exe, source, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "model")
    r = subprocess.run([exe, "make-model", "-g", os.path.join(source, "configs/models/tiny.yaml"), "-o", model],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("make-model", r)
    trunk = os.path.join(work, "trunk")
    r = subprocess.run([exe, "pack-trunk", model, trunk], capture_output=True, text=True)
    if r.returncode != 0:
        fail("pack-trunk", r)

    def run(folder, extra=(), sub=()):
        argv = [exe] + list(sub) + ["--config", os.path.join(source, "configs/default.yaml"), "--set",
                                    "model.path=" + folder, "--set", "model.generate_if_missing=false",
                                    "--set", "threads=1", "--set", "job.max_new_tokens=1", "--set", "job.report="] + list(extra)
        return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)

    def expect_refused(what, proc, name):
        if proc.returncode != 2 or MESSAGE not in proc.stderr or name not in proc.stderr:
            fail("%s: expected exit 2 naming %s and '%s'" % (what, name, MESSAGE), proc)

    r = run(model)
    if r.returncode != 0:
        fail("the unmodified checkpoint does not run", r)

    def copy(name):
        dst = os.path.join(work, name)
        shutil.copytree(model, dst)
        return dst

    for name in ("config.json", "model.safetensors.index.json", "tokenizer_config.json"):
        folder = copy("m-" + name)
        add_deep_key(os.path.join(folder, name))
        expect_refused(name, run(folder), name)

    # A shard header: its JSON rewritten with the key, the length prefix with it.
    folder = copy("m-shard")
    shard = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))[0]
    path = os.path.join(folder, shard)
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = data[8:8 + n].decode()
    new = ('{"k3_deep": ' + DEEP + ", " + header.lstrip()[1:]).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(new)) + new + data[8 + n:])
    expect_refused("a shard header", run(folder), shard)

    # trunk.json of a packed trunk.
    add_deep_key(os.path.join(trunk, "trunk.json"))
    expect_refused("trunk.json", run(model, ["--set", "model.packed_trunk=" + trunk]), "trunk.json")

    # A chat history record (k3host chat --resume reads it before its first prompt).
    history = os.path.join(work, "chat.jsonl")
    with open(history, "w") as f:
        f.write('{"role": "user", "k3_deep": ' + DEEP + "}\n")
    proc = run(model, ["--resume", history], sub=["chat"])
    expect_refused("a chat history record", proc, history + ":1")
    print("json depth files: passed")


if __name__ == "__main__":
    main()
