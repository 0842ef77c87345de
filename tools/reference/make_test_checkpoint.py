#!/usr/bin/python3
"""Writes a small random Kimi K3 checkpoint in the released format, for testing the reference.

Same tensor names, dtypes and shapes as docs/model-spec.md §2 (BF16 trunk, F32 conv/A_log/dt_bias/
router bias, MXFP4 experts as weight_packed/weight_scale U8), nested config.json with
text_config.linear_attn_config (or flat with --flat), several shards plus
model.safetensors.index.json. A_log is stored [head_dim] and its padding entries beyond
num_heads hold NON-zero values on purpose, so a reader that uses them is caught.

Usage: make_test_checkpoint.py OUT_DIR [--seed N] [--shards N] [--flat] [--set key=value ...]
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

TINY = {
    "hidden_size": 64, "num_hidden_layers": 7, "vocab_size": 384, "rms_norm_eps": 1e-5,
    "linear_attn_config": {"full_attn_layers": [3, 6, 7], "num_heads": 2, "head_dim": 16,
                           "short_conv_kernel_size": 4, "gate_lower_bound": -5.0},
    "num_attention_heads": 2, "q_lora_rank": 32, "kv_lora_rank": 32,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "mla_use_output_gate": True,
    "num_experts": 16, "num_experts_per_token": 4, "num_shared_experts": 1,
    "moe_intermediate_size": 32, "routed_expert_hidden_size": 64, "latent_moe_use_norm": True,
    "moe_renormalize": True, "routed_scaling_factor": 1.0, "first_k_dense_replace": 1,
    "intermediate_size": 96, "attn_res_block_size": 3,
    "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
}
PREFIX = "language_model.model."


def bf16_bits(x):
    """float -> BF16 bit pattern, round to nearest even."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


class Writer:
    def __init__(self, rng):
        self.rng = rng
        self.tensors = []   # (name, dtype, shape, bytes)

    def add(self, name, dtype, arr):
        arr = np.asarray(arr)
        if dtype == "BF16":
            data = bf16_bits(arr).astype("<u2").tobytes()
        elif dtype == "F32":
            data = arr.astype("<f4").tobytes()
        elif dtype == "U8":
            data = arr.astype(np.uint8).tobytes()
        else:
            raise ValueError(dtype)
        self.tensors.append((name, dtype, list(arr.shape), data))

    def linear(self, name, rows, cols, gain=1.0):
        self.add(name, "BF16", self.rng.standard_normal((rows, cols)) * gain / np.sqrt(cols))

    def norm(self, name, n):
        self.add(name, "BF16", 1.0 + 0.1 * self.rng.standard_normal(n))

    def mxfp4(self, base, rows, cols):
        """Random codes; scales chosen so the effective weight std is about 1/sqrt(cols)."""
        packed = self.rng.integers(0, 256, size=(rows, cols // 2), dtype=np.uint8)
        # random E2M1 codes have rms ~2.93; 2^(s-127) * 2.93 ~ 1/sqrt(cols)
        e0 = int(np.round(np.log2(1.0 / (2.93 * np.sqrt(cols)))))
        scale = (127 + e0 + self.rng.integers(-1, 2, size=(rows, cols // 32))).astype(np.uint8)
        nan_groups = self.rng.random((rows, cols // 32)) < 0.02   # scale 255 -> group contributes 0
        scale[nan_groups] = 255
        self.add(base + ".weight_packed", "U8", packed)
        self.add(base + ".weight_scale", "U8", scale)

    def write(self, out_dir, shards):
        os.makedirs(out_dir, exist_ok=True)
        per = -(-len(self.tensors) // shards)
        weight_map = {}
        total = 0
        for s in range(shards):
            part = self.tensors[s * per:(s + 1) * per]
            fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            header, off = {"__metadata__": {"format": "pt"}}, 0
            for name, dtype, shape, data in part:
                header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
                off += len(data)
                weight_map[name] = fname
                total += len(data)
            hj = json.dumps(header, separators=(",", ":")).encode()
            hj += b" " * (-len(hj) % 8)
            tmp = os.path.join(out_dir, fname + ".tmp")
            with open(tmp, "wb") as f:
                f.write(struct.pack("<Q", len(hj)))
                f.write(hj)
                for _, _, _, data in part:
                    f.write(data)
            os.replace(tmp, os.path.join(out_dir, fname))
        write_json(os.path.join(out_dir, "model.safetensors.index.json"),
                   {"metadata": {"total_size": total}, "weight_map": weight_map})


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def build(cfg, seed):
    rng = np.random.default_rng(seed)
    w = Writer(rng)
    E, V = cfg["hidden_size"], cfg["vocab_size"]
    lin = cfg["linear_attn_config"]
    mla = {v - 1 for v in lin["full_attn_layers"]}
    H, D, K = lin["num_heads"], lin["head_dim"], lin["short_conv_kernel_size"]
    w.add(PREFIX + "embed_tokens.weight", "BF16", rng.standard_normal((V, E)))
    w.norm(PREFIX + "norm.weight", E)
    w.norm(PREFIX + "output_attn_res_norm.weight", E)
    w.add(PREFIX + "output_attn_res_proj.weight", "BF16", rng.standard_normal((1, E)) * np.sqrt(2.0 / E))
    w.linear("language_model.lm_head.weight", V, E)
    for i in range(cfg["num_hidden_layers"]):
        p = f"{PREFIX}layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
            w.norm(p + n + ".weight", E)
        for n in ("self_attention_res_proj", "mlp_res_proj"):
            w.add(p + n + ".weight", "BF16", rng.standard_normal((1, E)) * np.sqrt(2.0 / E))
        a = p + "self_attn."
        if i in mla:
            Hm, nope, rope, vd = (cfg["num_attention_heads"], cfg["qk_nope_head_dim"],
                                  cfg["qk_rope_head_dim"], cfg["v_head_dim"])
            ql, kl = cfg["q_lora_rank"], cfg["kv_lora_rank"]
            w.linear(a + "q_a_proj.weight", ql, E)
            w.norm(a + "q_a_layernorm.weight", ql)
            w.linear(a + "q_b_proj.weight", Hm * (nope + rope), ql, gain=2.0)
            w.linear(a + "kv_a_proj_with_mqa.weight", kl + rope, E)
            w.norm(a + "kv_a_layernorm.weight", kl)
            w.linear(a + "kv_b_proj.weight", Hm * (nope + vd), kl, gain=2.0)
            if cfg["mla_use_output_gate"]:
                w.linear(a + "g_proj.weight", Hm * vd, E)
            w.linear(a + "o_proj.weight", E, Hm * vd)
        else:
            for n in ("q_proj", "k_proj", "v_proj"):
                w.linear(a + n + ".weight", H * D, E)
            for n in ("q_conv1d", "k_conv1d", "v_conv1d"):
                w.add(a + n + ".weight", "F32", rng.standard_normal((H * D, 1, K)) * 0.5)
            w.linear(a + "f_a_proj.weight", D, E)
            w.linear(a + "f_b_proj.weight", H * D, D)
            w.linear(a + "b_proj.weight", H, E)
            w.linear(a + "g_proj.weight", H * D, E)
            w.linear(a + "o_proj.weight", E, H * D)
            A_log = rng.uniform(-1.0, 1.0, size=max(D, H))
            A_log[H:] = rng.uniform(3.0, 5.0, size=max(D, H) - H)   # padding: must be ignored
            w.add(a + "A_log", "F32", A_log)
            w.add(a + "dt_bias", "F32", rng.standard_normal(H * D) * 0.5)
            w.add(a + "o_norm.weight", "F32", 1.0 + 0.1 * rng.standard_normal(D))
        if i < cfg["first_k_dense_replace"]:
            dI = cfg["intermediate_size"]
            w.linear(p + "mlp.gate_proj.weight", dI, E, gain=2.0)
            w.linear(p + "mlp.up_proj.weight", dI, E, gain=2.0)
            w.linear(p + "mlp.down_proj.weight", E, dI)
        else:
            m = p + "block_sparse_moe."
            N, I, L, ns = (cfg["num_experts"], cfg["moe_intermediate_size"], cfg["routed_expert_hidden_size"],
                           cfg["num_shared_experts"])
            w.linear(m + "gate.weight", N, E, gain=2.0)
            w.add(m + "gate.e_score_correction_bias", "F32", rng.standard_normal(N) * 0.05)
            w.linear(m + "routed_expert_down_proj.weight", L, E)
            w.norm(m + "routed_expert_norm.weight", L)
            w.linear(m + "routed_expert_up_proj.weight", E, L)
            if ns > 0:
                w.linear(m + "shared_experts.gate_proj.weight", I * ns, E, gain=2.0)
                w.linear(m + "shared_experts.up_proj.weight", I * ns, E, gain=2.0)
                w.linear(m + "shared_experts.down_proj.weight", E, I * ns)
            for e in range(N):
                x = f"{m}experts.{e}."
                w.mxfp4(x + "w1", I, L)
                w.mxfp4(x + "w2", L, I)
                w.mxfp4(x + "w3", I, L)
    return w


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--flat", action="store_true", help="flat config.json (text keys at the root)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="override a text_config key (linear_attn_config.X for KDA keys)")
    args = ap.parse_args(argv)
    cfg = json.loads(json.dumps(TINY))
    for kv in args.set:
        key, _, val = kv.partition("=")
        target = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            target = target[p]
        target[parts[-1]] = json.loads(val)
    V = cfg["vocab_size"]
    text = dict(cfg, model_type="kimi_linear", bos_token_id=V - 2, eos_token_id=V - 1)
    doc = text if args.flat else {"model_type": "kimi_k3", "bos_token_id": V - 2, "eos_token_id": V - 1,
                                  "text_config": text}
    build(cfg, args.seed).write(args.out_dir, args.shards)
    write_json(os.path.join(args.out_dir, "config.json"), doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
