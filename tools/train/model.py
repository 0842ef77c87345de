"""The K3 model as trainable torch Parameters, running the reference's own forward pass.

`TrainModel` subclasses tools/reference's `K3Model`: the layer loop (`forward_sequence`:
AttnRes, norms, the KDA/MLA choice, dense vs MoE, the head), the dense and shared MLPs, the
expert MLP and the LatentMoE finish are the reference's code unchanged. Only what must differ
for training is overridden: weights come from a dict of Parameters instead of a checkpoint,
ids are a [B, T] batch, KDA folds the batch into its (independent) heads so one chunked call
serves every sequence, MLA runs the reference per sequence, and the router runs vectorised
(k3_math.route_batch) with the selected experts applied to their tokens in groups.
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import k3_math as km  # noqa: E402
from k3_config import K3Config  # noqa: E402
from k3_model import HEAD, PREFIX, K3Model  # noqa: E402

EXPERT_KEYS = ("w1", "w3", "w2")


def expert_stack_name(i, w):
    """Training keeps a layer's routed experts stacked [N, rows, cols]; export splits them."""
    return f"{PREFIX}layers.{i}.block_sparse_moe.experts.{w}"


class TrainModel(K3Model):
    def __init__(self, config_doc, params, dtype=torch.float32):
        # No checkpoint: K3Model.__init__ would open one, so set what the forward pass reads.
        self.cfg = K3Config(config_doc)
        self.config_doc = config_doc
        self.dtype = dtype
        self.params = params          # release tensor name -> tensor (Parameter while training)
        self.loads = {}               # MoE layer -> tokens per expert in the last forward
        self.kda_chunk = 16           # measured fastest on CPU (8 and 16 tie; 32 is slower)

    # ---------------------------------------------------------------- weights

    def w(self, name):
        return self.params[name]

    def expert(self, i, e):
        return tuple(self.params[expert_stack_name(i, w)][e] for w in EXPERT_KEYS)

    def embed(self, ids):
        return torch.nn.functional.embedding(ids, self.params[PREFIX + "embed_tokens.weight"])

    # ---------------------------------------------------------------- batched blocks

    def kda_sequence(self, i, X, chunk):
        """The reference's kda_sequence for X [B, T, E]: batch b's head h becomes head b*H+h."""
        c = self.cfg
        H, D = c.kda_H, c.kda_D
        B, T, _ = X.shape
        a = "self_attn."
        qkv = []
        for n in ("q", "k", "v"):
            pre = X @ self.lw(i, a + n + "_proj.weight").T                         # [B, T, C]
            wconv = self.lw(i, a + n + "_conv1d.weight").repeat(B, 1, 1)           # channel b*C+c
            out = km.causal_conv_sequence(pre.transpose(0, 1).reshape(T, B * H * D), wconv)
            qkv.append(km.silu(out).reshape(T, B * H, D))
        q, k, v = qkv
        q = km.l2_normalise(q) * (D ** -0.5)
        k = km.l2_normalise(k)
        ft = (X @ self.lw(i, a + "f_a_proj.weight").T) @ self.lw(i, a + "f_b_proj.weight").T
        g = km.kda_gate(ft, self.A_log(i), self.lw(i, a + "dt_bias"), c.gate_lb, H, D)   # [B, T, H, D]
        g = g.transpose(0, 1).reshape(T, B * H, D)
        beta = torch.sigmoid(X @ self.lw(i, a + "b_proj.weight").T).transpose(0, 1).reshape(T, B * H)
        S0 = torch.zeros(B * H, D, D, dtype=X.dtype)
        _, o = km.kda_chunked(S0, q, k, v, g, beta, self.kda_chunk, pair=km.pair_elementwise)
        o = o.reshape(T, B, H, D).transpose(0, 1)                                  # [B, T, H, D]
        gate = torch.sigmoid((X @ self.lw(i, a + "g_proj.weight").T).reshape(B, T, H, D))
        y = km.rms_norm(o, self.lw(i, a + "o_norm.weight"), c.eps) * gate
        return y.reshape(B, T, H * D) @ self.lw(i, a + "o_proj.weight").T

    def mla_sequence(self, i, X):
        return torch.stack([super(TrainModel, self).mla_sequence(i, x) for x in X])

    def moe_sequence(self, i, X):
        c = self.cfg
        shape = X.shape
        Xf = X.reshape(-1, shape[-1])
        m = "block_sparse_moe."
        idx, wts = km.route_batch(Xf, self.lw(i, m + "gate.weight"), self.lw(i, m + "gate.e_score_correction_bias"),
                                  c.topk, c.renormalize, c.routed_scale)
        Z = Xf @ self.lw(i, m + "routed_expert_down_proj.weight").T
        # Every (token, slot) pair sorted by expert, then laid out [expert, row-in-expert, L] so
        # one batched product per expert matrix replaces a Python loop over the experts. Per
        # expert it is the reference's expert_apply: W2 SiTU(W1 z, W3 z).
        flat_e = idx.reshape(-1)
        order = torch.argsort(flat_e, stable=True)
        e_sorted = flat_e[order]
        counts = torch.bincount(flat_e, minlength=c.n_experts)
        self.loads[i] = counts
        first = torch.cumsum(counts, 0) - counts
        row = torch.arange(len(order)) - first[e_sorted]
        tok = order // c.topk                                   # the token of each sorted slot
        cap = int(counts.max())
        Zp = torch.zeros(c.n_experts, cap, c.L, dtype=X.dtype).index_put((e_sorted, row), Z[tok])
        W1, W3, W2 = (self.params[expert_stack_name(i, w)] for w in EXPERT_KEYS)
        H = km.situ(torch.bmm(Zp, W1.transpose(1, 2)), torch.bmm(Zp, W3.transpose(1, 2)),
                    c.situ_beta, c.situ_lin_beta)
        out = torch.bmm(H, W2.transpose(1, 2))[e_sorted, row] * wts.reshape(-1)[order].unsqueeze(-1)
        R = torch.zeros(Xf.shape[0], c.L, dtype=X.dtype).index_add(0, tok, out)
        return self.moe_finish(i, R, Xf).reshape(shape)


# -------------------------------------------------------------------- parameters

def param_shapes(cfg):
    """name -> (shape, init kind) for every tensor of the model, release names (stacked experts)."""
    E, V = cfg.E, cfg.vocab
    out = {PREFIX + "embed_tokens.weight": ((V, E), "embed"), PREFIX + "norm.weight": ((E,), "one"),
           PREFIX + "output_attn_res_norm.weight": ((E,), "one"),
           PREFIX + "output_attn_res_proj.weight": ((1, E), "zero"), HEAD: ((V, E), "linear")}
    for i in range(cfg.n_layers):
        p = f"{PREFIX}layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
            out[p + n + ".weight"] = ((E,), "one")
        for n in ("self_attention_res_proj", "mlp_res_proj"):
            out[p + n + ".weight"] = ((1, E), "zero")   # zero pseudo-query: AttnRes starts as a plain mean
        a = p + "self_attn."
        if cfg.is_mla(i):
            H, nope, rope, vd = cfg.mla_H, cfg.qk_nope, cfg.qk_rope, cfg.v_head
            out.update({a + "q_a_proj.weight": ((cfg.q_lora, E), "linear"),
                        a + "q_a_layernorm.weight": ((cfg.q_lora,), "one"),
                        a + "q_b_proj.weight": ((H * (nope + rope), cfg.q_lora), "linear"),
                        a + "kv_a_proj_with_mqa.weight": ((cfg.kv_lora + rope, E), "linear"),
                        a + "kv_a_layernorm.weight": ((cfg.kv_lora,), "one"),
                        a + "kv_b_proj.weight": ((H * (nope + vd), cfg.kv_lora), "linear"),
                        a + "o_proj.weight": ((E, H * vd), "out")})
            if cfg.mla_gate:
                out[a + "g_proj.weight"] = ((H * vd, E), "linear")
        else:
            H, D, K = cfg.kda_H, cfg.kda_D, cfg.conv_K
            for n in ("q_proj", "k_proj", "v_proj", "g_proj"):
                out[a + n + ".weight"] = ((H * D, E), "linear")
            for n in ("q_conv1d", "k_conv1d", "v_conv1d"):
                out[a + n + ".weight"] = ((H * D, 1, K), "conv")
            out.update({a + "f_a_proj.weight": ((D, E), "linear"), a + "f_b_proj.weight": ((H * D, D), "linear"),
                        a + "b_proj.weight": ((H, E), "linear"), a + "o_proj.weight": ((E, H * D), "out"),
                        a + "A_log": ((H,), "zero"), a + "dt_bias": ((H * D,), "dt_bias"),
                        a + "o_norm.weight": ((D,), "one")})
        if cfg.is_dense(i):
            m = p + "mlp."
            out.update({m + "gate_proj.weight": ((cfg.dense_I, E), "linear"),
                        m + "up_proj.weight": ((cfg.dense_I, E), "linear"),
                        m + "down_proj.weight": ((E, cfg.dense_I), "out")})
        else:
            m = p + "block_sparse_moe."
            N, I, L, SI = cfg.n_experts, cfg.I, cfg.L, cfg.I * cfg.n_shared
            out.update({m + "gate.weight": ((N, E), "linear"), m + "gate.e_score_correction_bias": ((N,), "buffer"),
                        m + "routed_expert_down_proj.weight": ((L, E), "linear"),
                        m + "routed_expert_up_proj.weight": ((E, L), "out")})
            if cfg.latent_norm:
                out[m + "routed_expert_norm.weight"] = ((L,), "one")
            if cfg.n_shared:
                out.update({m + "shared_experts.gate_proj.weight": ((SI, E), "linear"),
                            m + "shared_experts.up_proj.weight": ((SI, E), "linear"),
                            m + "shared_experts.down_proj.weight": ((E, SI), "out")})
            out[expert_stack_name(i, "w1")] = ((N, I, L), "expert")
            out[expert_stack_name(i, "w3")] = ((N, I, L), "expert")
            out[expert_stack_name(i, "w2")] = ((N, L, I), "expert_out")
    return out


def init_params(cfg, seed):
    """Deterministic initial weights (one generator, names in a fixed order)."""
    gen = torch.Generator().manual_seed(seed)
    out_scale = 1.0 / math.sqrt(2 * cfg.n_layers)      # residual writers start small (GPT-2 style)
    params = {}
    for name, (shape, kind) in sorted(param_shapes(cfg).items()):
        if kind == "one":
            t = torch.ones(shape)
        elif kind in ("zero", "buffer"):
            t = torch.zeros(shape)
        elif kind == "embed":
            t = torch.randn(shape, generator=gen)
        elif kind == "conv":
            t = torch.randn(shape, generator=gen) / math.sqrt(shape[-1])
        elif kind == "dt_bias":
            # g = lb*sigmoid(exp(A_log)*(f + dt_bias)) with A_log 0: dt_bias in [-7, -2] starts
            # each channel with decay alpha = exp(g) between ~0.995 and ~0.55, a spread of memories.
            t = -2.0 - 5.0 * torch.rand(shape, generator=gen)
        else:
            fan_in = shape[-1]
            t = torch.randn(shape, generator=gen) / math.sqrt(fan_in)
            if kind in ("out", "expert_out"):
                t = t * out_scale
        params[name] = t if kind == "buffer" else torch.nn.Parameter(t)
    return params


def params_from_checkpoint(model_dir, dtype=torch.float64):
    """A released-format checkpoint as TrainModel parameters (experts decoded and stacked)."""
    ref = K3Model(model_dir, dtype=dtype)
    cfg = ref.cfg
    params = {}
    for name in param_shapes(cfg):
        if ".experts." in name:
            continue
        params[name] = ref.w(name)
    for i in range(cfg.n_layers):
        if cfg.is_dense(i):
            continue
        mats = [ref.expert(i, e) for e in range(cfg.n_experts)]
        for j, w in enumerate(EXPERT_KEYS):
            params[expert_stack_name(i, w)] = torch.stack([m[j] for m in mats])
    return ref.ck.config_json, params
