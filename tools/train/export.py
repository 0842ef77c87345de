"""Writes a trained float32 model (train.py's model.pt) as a K3 release-format checkpoint.

Usage: /usr/bin/python3 tools/train/export.py MODEL_PT TOKENIZER_DIR OUT_DIR [--shards 2]

Tensor names, shapes and dtypes as docs/model-spec.md §2/§4 (the layout tools/reference reads
and make_test_checkpoint.py writes): routed experts MXFP4 (weight_packed + weight_scale U8),
the KDA conv kernels, A_log (stored [head_dim] as released, zero past num_heads), dt_bias,
o_norm and the router's e_score_correction_bias F32, every other tensor BF16 (round to nearest
even). config.json nests the text keys under text_config and says `k3host_thinking: false`:
train.py trains on plain text, never on K3's chat format, so chat and serve answer such a
model with the think channel closed (docs/chat.md, "Thinking"). TOKENIZER_DIR supplies
tiktoken.model and tokenizer_config.json, copied as they are.
"""

import argparse
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import make_test_checkpoint as mtc  # noqa: E402  (its Writer/write_json: the same file layout)
from k3_checkpoint import E2M1  # noqa: E402

F32_SUFFIXES = ("_conv1d.weight", ".A_log", ".dt_bias", ".o_norm.weight", ".e_score_correction_bias")
MAGNITUDES = E2M1[:8]                                  # 0, 0.5, 1, 1.5, 2, 3, 4, 6


def mxfp4_encode(w):
    """float [R, C] (C a multiple of 32) -> (packed U8 [R, C/2], scale U8 [R, C/32]).

    Per 32-column group: scale byte s = floor(log2(amax)) - 2 + 127 (amax/4 rounded down to a
    power of two, as OCP MX does), so amax / 2^(s-127) lies in [4, 8); each value / 2^(s-127)
    rounds to the nearest E2M1 magnitude (ties to the even code), saturating at 6; sign in bit 3.
    An all-zero group gets s = 127 and zero codes. Low nibble = even column (§4).
    """
    w = np.asarray(w, dtype=np.float64)
    R, C = w.shape
    g = w.reshape(R, C // 32, 32)
    amax = np.abs(g).max(axis=-1)
    e = np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2
    s = np.clip(np.where(amax > 0, e + 127, 127), 0, 254).astype(np.int64)
    x = np.abs(g) / np.ldexp(1.0, (s - 127))[..., None]
    # Distance to each magnitude; a hair added to the odd codes makes exact ties pick the even one.
    d = np.abs(x[..., None] - MAGNITUDES) + 1e-12 * (np.arange(8) & 1)
    codes = d.argmin(axis=-1).astype(np.uint8)
    codes |= np.where((g < 0) & (codes > 0), 8, 0).astype(np.uint8)
    codes = codes.reshape(R, C)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return packed, s.astype(np.uint8)


def export(params, config_doc, tokenizer_dir, out_dir, shards):
    text = dict(config_doc["text_config"])
    lin = text["linear_attn_config"]
    w = mtc.Writer(None)
    for name in sorted(params):
        t = params[name].detach().to(torch.float64).numpy()
        if ".experts." in name:
            base, kind = name.rsplit(".", 1)                 # ...block_sparse_moe.experts, w1|w2|w3
            for e in range(t.shape[0]):
                packed, scale = mxfp4_encode(t[e])
                w.add(f"{base}.{e}.{kind}.weight_packed", "U8", packed)
                w.add(f"{base}.{e}.{kind}.weight_scale", "U8", scale)
        elif name.endswith(".A_log"):
            padded = np.zeros(max(lin["head_dim"], t.shape[0]))
            padded[:t.shape[0]] = t
            w.add(name, "F32", padded)
        elif name.endswith(F32_SUFFIXES):
            w.add(name, "F32", t)
        else:
            w.add(name, "BF16", t)
    w.write(out_dir, shards)
    text["model_type"] = "kimi_linear"
    mtc.write_json(os.path.join(out_dir, "config.json"),
                   {"model_type": "kimi_k3", "bos_token_id": text["bos_token_id"],
                    "eos_token_id": text["eos_token_id"], "k3host_thinking": False, "text_config": text})
    for f in ("tiktoken.model", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(tokenizer_dir, f), os.path.join(out_dir, f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_pt")
    ap.add_argument("tokenizer_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--shards", type=int, default=2)
    args = ap.parse_args()
    ck = torch.load(args.model_pt)
    export(ck["params"], ck["config"], args.tokenizer_dir, args.out_dir, args.shards)
    size = sum(os.path.getsize(os.path.join(args.out_dir, f)) for f in os.listdir(args.out_dir))
    print(f"{args.out_dir}: {size} bytes")


if __name__ == "__main__":
    main()
