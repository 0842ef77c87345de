#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (tests/fuzz/corpus/<harness>/).

Text seeds (JSON, YAML, headers) are written from the literals below; the binary ones
(safetensors, state file, trace, packed trunk, rank file) come from a tiny model made with
the k3host given, so they are real files of the current formats:

    tests/fuzz/make_corpus.py --k3host build/bin/k3host

Each seed is small (a few KB at most). Run it again after a format changes and commit the
result; regressions/ is never touched.
"""
import argparse
import json
import os
import pathlib
import shutil
import struct
import subprocess
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
# The checkpoint identity tests/fuzz/fuzz_packed_trunk.cpp expects (kIdentity), and XXH3-64 of
# no bytes (an empty row table).
FUZZ_IDENTITY = "6b33686f73743130"
XXH3_EMPTY = "2d06800538d394c2"
SRC = HERE.parent.parent


def put(harness, name, data):
    d = HERE / "corpus" / harness
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def run(*args, **kw):
    subprocess.run([str(a) for a in args], check=True, stdout=subprocess.DEVNULL, **kw)


def small_shard(header, count):
    """A shard with the `count` smallest tensors of a real header, re-packed, data zeros."""
    tensors = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                     key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0])[:count]
    out, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, t in tensors:
        n = t["data_offsets"][1] - t["data_offsets"][0]
        out[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(out, separators=(",", ":"))
    text += " " * ((-(8 + len(text))) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + bytes(offset)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k3host", required=True)
    a = ap.parse_args()
    k3host = pathlib.Path(a.k3host).resolve()
    shutil.rmtree(HERE / "corpus", ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="k3fuzz-corpus-") as tmp:
        tmp = pathlib.Path(tmp)
        model = tmp / "tiny"
        run(k3host, "make-model", "-g", "tiny", "-o", model)
        state, trace = tmp / "s.k3state", tmp / "t.k3trace"
        run(k3host, "--config", SRC / "configs/default.yaml", "--set", f"model.path={model}",
            "--set", "model.generate_if_missing=false", "--set", "memory.context=64", "--set", "threads=1",
            "--set", "job.max_new_tokens=2", "--set", "job.stop_at_eos=false", "--ids", "5,17,99",
            "--set", f"job.save_state={state}", "--set", f"trace.out={trace}", cwd=tmp)
        run(k3host, "pack-trunk", model, tmp / "trunk")
        run(k3host, "pack-trunk", "--codec", "bf16-zstd", model, tmp / "coded")
        run(k3host, "pack-trunk", "--codec", "bf16-huff", model, tmp / "coded-huff")
        gen = tmp / "gen.k3trace"
        run(k3host, "sim", "--generate-trace", gen, "--layers", "3", "--experts", "8", "--top-k", "2",
            "--tokens", "6", "--seed", "3")

        # safetensors: small re-packed shards of the tiny model's headers, and edge cases.
        header = {}
        for f in sorted(model.glob("*.safetensors")):
            shard = f.read_bytes()
            (hlen,) = struct.unpack("<Q", shard[:8])
            header.update(json.loads(shard[8:8 + hlen]))
        for n in (1, 3, 6):
            put("safetensors", f"tiny-{n}-tensors.safetensors", small_shard(header, n))
        put("safetensors", "empty-object", struct.pack("<Q", 2) + b"{}")
        put("safetensors", "metadata-only", struct.pack("<Q", 26) + b'{"__metadata__":{"a":"b"}}')

        # checkpoint_index: mode byte (odd = a storage that cannot list) + index json.
        index = json.loads((model / "model.safetensors.index.json").read_text())
        names = {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                 "model.norm.weight": "model-00001-of-00002.safetensors",
                 "lm_head.weight": "model-00002-of-00002.safetensors"}
        ours = json.dumps({"metadata": {"total_size": 36}, "weight_map": names})
        put("checkpoint_index", "agrees-listing", b"\0" + ours.encode())
        put("checkpoint_index", "agrees-http", b"\1" + ours.encode())
        few = dict(list(index["weight_map"].items())[:4])
        put("checkpoint_index", "tiny-entries-http", b"\1" + json.dumps({"weight_map": few}).encode())

        # model_config: the tiny model's config.json, nested, and flattened.
        cfg = (model / "config.json").read_text()
        put("model_config", "tiny-config.json", cfg)
        c = json.loads(cfg)
        flat = dict(c.get("text_config", c))
        flat.update(flat.pop("linear_attn_config", {}))
        put("model_config", "tiny-flat.json", json.dumps(flat))

        # pipeline: the presets and the shipped configs, then some with --set values.
        for f in sorted((SRC / "presets").glob("*.yaml")) + [SRC / "configs/default.yaml"]:
            put("pipeline", f.name, f.read_bytes())
        put("pipeline", "sets", b"extends: ../configs/default.yaml\njob:\n  max_new_tokens: 4\n\0job.sampling.temperature=0.5\0"
                                b"memory.context=128\0storage.params.block_size=4096\0job.ids=[1, 2, 3]")
        put("pipeline", "env", b"model:\n  path: ${HOME:-/tmp}/models/x\njob:\n  prompt: \"$${HOME} ${USER:-me}\"\n")

        # state_file: mode byte (odd = the harness repairs fingerprint, checkpoint identity,
        # size and checksum).
        s = state.read_bytes()
        put("state_file", "tiny-3-ids", b"\0" + s)
        put("state_file", "tiny-3-ids-repair", b"\1" + s)
        put("state_file", "header-only-repair", b"\1" + s[:48])

        # trace: mode byte (odd = the harness repairs count and checksum).
        for name, t in (("run", trace), ("generated", gen)):
            b = t.read_bytes()[:80 + 8 * 64]
            put("trace", f"{name}-repair", b"\1" + b)
        put("trace", "run-exact", b"\0" + trace.read_bytes()[:80 + 8 * 512])

        # packed_trunk: u32 trunk.bin size + trunk.json (layers trimmed to keep it small), with
        # the checkpoint identity the harness expects (FUZZ_IDENTITY).
        tj = json.loads((tmp / "trunk/trunk.json").read_text())
        tj["checkpoint_identity"] = FUZZ_IDENTITY
        size = (tmp / "trunk/trunk.bin").stat().st_size
        put("packed_trunk", "tiny-trunk.json", struct.pack("<I", size % (16 << 20)) + json.dumps(tj).encode())
        tj["layers"] = tj["layers"][:1]
        tj["globals"] = []
        put("packed_trunk", "one-layer", struct.pack("<I", size % (16 << 20)) + json.dumps(tj).encode())
        # Coded (--codec bf16-zstd): the manifest alone (trunk.bin zeros), and the first
        # tensors of layer 0 (a few KB of real streams after a NUL, so the decoder gets real
        # streams to mutate; the run's hashes then differ, and the harness decodes regardless).
        for folder, prefix in (("coded", "coded"), ("coded-huff", "coded-huff")):
            cj = json.loads((tmp / folder / "trunk.json").read_text())
            cj["checkpoint_identity"] = FUZZ_IDENTITY
            size = (tmp / folder / "trunk.bin").stat().st_size
            put("packed_trunk", f"{prefix}-tiny.json", struct.pack("<I", size % (16 << 20)) + json.dumps(cj).encode())
            layer = cj["layers"][0]
            keep = [t for t in layer["tensors"] if t["coded_off"] + t["coded_bytes"] <= 6000]
            last = keep[-1]
            layer["tensors"] = keep
            layer["nbytes"] = last["off"] + last["nbytes"]
            layer["coded_bytes"] = last["coded_off"] + last["coded_bytes"]
            cj["layers"], cj["globals"] = [layer], []
            cj["row_sums"] = {"file_off": 0, "count": 0, "xxh3": XXH3_EMPTY}  # the globals held the rows
            cj["trunk_bin_bytes"] = 4096 * ((layer["coded_bytes"] + 4095) // 4096)
            coded = (tmp / folder / "trunk.bin").read_bytes()[layer["file_off"]:layer["file_off"] + layer["coded_bytes"]]
            put("packed_trunk", f"{prefix}-layer-0-head",
                struct.pack("<I", cj["trunk_bin_bytes"]) + json.dumps(cj).encode() + b"\0" + coded)

        # tiktoken_files: rank file \0 tokenizer_config.json \0 inline specials.
        ranks = (model / "tiktoken.model").read_bytes()
        tcfg = (model / "tokenizer_config.json").read_bytes()
        put("tiktoken_files", "tiny", ranks + b"\0" + tcfg)
        put("tiktoken_files", "tiny-first-300", b"\n".join(ranks.split(b"\n")[:300]) + b"\0" + tcfg + b"\0<x>=9000")

    # tiktoken_codec: mode byte (bit 0: specials; bit 1: the rest is u32 ids) + text.
    texts = ["Hello, world! 123 ünïcødé\n\tend", "<|im_user|>hi<|im_end|><think>x</think>", "    \n\n  x  ",
             "日本語のテキスト and 中文", "emoji 👍🏽 and combining e\u0301", "a" * 300, "1234567890 3.14159 -42"]
    for i, t in enumerate(texts):
        put("tiktoken_codec", f"text-{i}", b"\0" + t.encode())
        put("tiktoken_codec", f"special-{i}", b"\1" + t.encode())
    put("tiktoken_codec", "ids", b"\2" + struct.pack("<8I", 72, 101, 300, 2048, 2050, 2100, 5, 700))
    put("tiktoken_codec", "ids-bad", b"\2" + struct.pack("<2I", 1, 99999))
    put("tiktoken_codec", "invalid-utf8", b"\0abc\xff\xfe")

    # serve_request: mode byte (odd = /v1/completions) + body.
    chats = [
        {"model": "k3", "messages": [{"role": "user", "content": "Hi"}]},
        {"messages": [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "2+2?"}],
         "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "seed": 3, "stop": ["\n", "END"],
         "stream": True, "stream_options": {"include_usage": True}, "reasoning_effort": "low"},
        {"messages": [{"role": "user", "content": "weather?"},
                      {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
         "tools": [{"type": "function", "function": {"name": "get_weather", "description": "w",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
         "tool_choice": "auto"},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}], "n": 1, "logprobs": False},
    ]
    for i, b in enumerate(chats):
        put("serve_request", f"chat-{i}", b"\0" + json.dumps(b).encode())
    comps = [{"prompt": "Once upon", "max_tokens": 4}, {"prompt": [1, 2, 3], "echo": False},
             {"prompt": "x", "stream": True, "stop": "y", "temperature": 0}]
    for i, b in enumerate(comps):
        put("serve_request", f"completion-{i}", b"\1" + json.dumps(b).encode())
    put("serve_request", "not-json", b"\0{\"messages\": [")
    serve_http_seeds()


def serve_http_seeds():
    """serve_http: the bytes of one connection, one or more requests."""
    chat = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}).encode()
    comp = json.dumps({"prompt": "Once upon", "max_tokens": 2}).encode()

    def post(path, body, extra=b""):
        return (b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra +
                b"Content-Length: %d\r\n\r\n" % len(body) + body)

    put("serve_http", "get-health", b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    put("serve_http", "chat", post(b"/v1/chat/completions", chat, b"Authorization: Bearer k\r\n"))
    put("serve_http", "pipelined", post(b"/v1/completions", comp) + b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    put("serve_http", "chunked", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 b"%x\r\n%s\r\n0\r\n\r\n" % (len(comp), comp))
    put("serve_http", "expect-continue", post(b"/v1/completions", comp, b"Expect: 100-continue\r\n"))
    put("serve_http", "two-lengths", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n{}")
    put("serve_http", "gzip-coding", b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n" + comp)
    put("serve_http", "no-length", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n")
    put("serve_http", "http10-keepalive", b"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    put("serve_http", "nested-body", post(b"/v1/completions", b'{"prompt":"x","user":' + b"[" * 70 + b"]" * 70 + b"}"))

    # http_response: header lines \0 read requests (u32 offset, u16 length, u8 gap, u8 max range).
    reqs = struct.pack("<IHBB", 0, 4095, 1, 200) + struct.pack("<IHBB", 5000, 100, 1, 200) + \
        struct.pack("<IHBB", 4000, 2000, 0, 3)
    put("http_response", "206", b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-4095/65536\r\n"
                                b"ETag: \"abc\"\r\nLast-Modified: Tue, 01 Dec 2026 00:00:00 GMT\r\n\r\n\0" + reqs)
    put("http_response", "redirect", b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Range: bytes 1-2/3\r\n"
                                     b"HTTP/2 206\r\ncontent-range:  bytes 10-19/*\r\n")
    put("http_response", "416", b"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */0\r\n")
    put("http_response", "100-continue", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\netag: W/\"x\"\r\n")


if __name__ == "__main__":
    main()
