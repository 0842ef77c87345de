"""The Kimi K3 text model in float64: weights bound by the released tensor names (docs/model-spec.md §2)
and the forward pass of §3 in two forms.

- `step(state, token)`: one token with carried state (KDA S per head and conv history, the MLA
  latent cache of normed c and k_r). This is what decoding runs.
- `forward_sequence(ids)`: the whole prefix at once with zero state (conv as a padded conv1d,
  KDA in the chunk/WY form, MLA with per-head k/v expanded and a causal mask, AttnRes and
  MoE batched over positions). It shares no recurrence code with `step`, so agreement of the
  two is a real check.
"""

import collections
import math

import numpy as np
import torch

import k3_math as km
from k3_checkpoint import Checkpoint, CheckpointError, mxfp4_decode, to_float64
from k3_config import K3Config

PREFIX = "language_model.model."
HEAD = "language_model.lm_head.weight"
FLOATS = ("BF16", "F32")   # every tensor that is not a routed expert (the release mixes both)
U8 = ("U8",)


class K3Model:
    def __init__(self, model_dir, dtype=torch.float64, expert_cache_bytes=2 << 30):
        self.ck = Checkpoint(model_dir)
        self.cfg = K3Config(self.ck.config_json, f"{model_dir}/config.json")
        self.dtype = dtype
        self._cache = {}
        self._experts = collections.OrderedDict()
        self._expert_bytes = 0
        self._expert_cache_limit = expert_cache_bytes
        self._check_inventory()

    # ------------------------------------------------------------------ binding (§2)

    def _inventory(self):
        """Every tensor the text model needs: (name, shape or None, allowed dtypes)."""
        c = self.cfg
        E, V = c.E, c.vocab
        inv = [(PREFIX + "embed_tokens.weight", (V, E), FLOATS), (PREFIX + "norm.weight", (E,), FLOATS),
               (PREFIX + "output_attn_res_norm.weight", (E,), FLOATS),
               (PREFIX + "output_attn_res_proj.weight", (1, E), FLOATS), (HEAD, (V, E), FLOATS)]
        for i in range(c.n_layers):
            p = f"{PREFIX}layers.{i}."
            for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
                inv.append((p + n + ".weight", (E,), FLOATS))
            for n in ("self_attention_res_proj", "mlp_res_proj"):
                inv.append((p + n + ".weight", (1, E), FLOATS))
            a = p + "self_attn."
            if c.is_mla(i):
                H, nope, rope, vd = c.mla_H, c.qk_nope, c.qk_rope, c.v_head
                inv += [(a + "q_a_proj.weight", (c.q_lora, E), FLOATS),
                        (a + "q_a_layernorm.weight", (c.q_lora,), FLOATS),
                        (a + "q_b_proj.weight", (H * (nope + rope), c.q_lora), FLOATS),
                        (a + "kv_a_proj_with_mqa.weight", (c.kv_lora + rope, E), FLOATS),
                        (a + "kv_a_layernorm.weight", (c.kv_lora,), FLOATS),
                        (a + "kv_b_proj.weight", (H * (nope + vd), c.kv_lora), FLOATS),
                        (a + "o_proj.weight", (E, H * vd), FLOATS)]
                if c.mla_gate:
                    inv.append((a + "g_proj.weight", (H * vd, E), FLOATS))
            else:
                H, D, K = c.kda_H, c.kda_D, c.conv_K
                for n in ("q_proj", "k_proj", "v_proj", "g_proj"):
                    inv.append((a + n + ".weight", (H * D, E), FLOATS))
                for n in ("q_conv1d", "k_conv1d", "v_conv1d"):
                    inv.append((a + n + ".weight", (H * D, 1, K), FLOATS))
                inv += [(a + "f_a_proj.weight", (D, E), FLOATS), (a + "f_b_proj.weight", (H * D, D), FLOATS),
                        (a + "b_proj.weight", (H, E), FLOATS), (a + "o_proj.weight", (E, H * D), FLOATS),
                        (a + "A_log", None, FLOATS), (a + "dt_bias", (H * D,), FLOATS),
                        (a + "o_norm.weight", (D,), FLOATS)]
            if c.is_dense(i):
                m = p + "mlp."
                inv += [(m + "gate_proj.weight", (c.dense_I, E), FLOATS), (m + "up_proj.weight", (c.dense_I, E), FLOATS),
                        (m + "down_proj.weight", (E, c.dense_I), FLOATS)]
            else:
                m = p + "block_sparse_moe."
                N, I, L, SI = c.n_experts, c.I, c.L, c.I * c.n_shared
                inv += [(m + "gate.weight", (N, E), FLOATS), (m + "gate.e_score_correction_bias", (N,), FLOATS),
                        (m + "routed_expert_down_proj.weight", (L, E), FLOATS),
                        (m + "routed_expert_up_proj.weight", (E, L), FLOATS)]
                if c.latent_norm:
                    inv.append((m + "routed_expert_norm.weight", (L,), FLOATS))
                if c.n_shared > 0:
                    inv += [(m + "shared_experts.gate_proj.weight", (SI, E), FLOATS),
                            (m + "shared_experts.up_proj.weight", (SI, E), FLOATS),
                            (m + "shared_experts.down_proj.weight", (E, SI), FLOATS)]
                for e in range(N):
                    for w, (r, cols) in (("w1", (I, L)), ("w3", (I, L)), ("w2", (L, I))):
                        x = f"{m}experts.{e}.{w}."
                        # two codes a byte, one scale a 32-column group; an odd tail rounds up
                        inv += [(x + "weight_packed", (r, (cols + 1) // 2), U8),
                                (x + "weight_scale", (r, (cols + 31) // 32), U8)]
        return inv

    def _check_inventory(self):
        for name, shape, dtypes in self._inventory():
            e = self.ck.entry(name)
            if e.dtype not in dtypes:
                raise CheckpointError(f"{e.path}: tensor {name}: dtype {e.dtype}, expected {'/'.join(dtypes)}")
            if shape is not None and e.shape != shape:
                raise CheckpointError(f"{e.path}: tensor {name}: shape {list(e.shape)}, expected {list(shape)}")
            if name.endswith("A_log"):
                H = self.cfg.kda_H
                if len(e.shape) != 1 or e.shape[0] < H:
                    raise CheckpointError(f"{e.path}: tensor {name}: shape {list(e.shape)}, expected 1-D with "
                                          f"at least num_heads={H} entries")

    def w(self, name):
        t = self._cache.get(name)
        if t is None:
            t = torch.from_numpy(self.ck.float64(name)).to(self.dtype)
            self._cache[name] = t
        return t

    def lw(self, i, suffix):
        return self.w(f"{PREFIX}layers.{i}.{suffix}")

    def expert(self, i, e):
        """(W1 [I, L], W3 [I, L], W2 [L, I]) of routed expert e in layer i, decoded per §4."""
        key = (i, e)
        got = self._experts.get(key)
        if got is not None:
            self._experts.move_to_end(key)
            return got
        base = f"{PREFIX}layers.{i}.block_sparse_moe.experts.{e}."
        c = self.cfg
        cols = {"w1": c.L, "w3": c.L, "w2": c.I}
        mats = tuple(torch.from_numpy(mxfp4_decode(self.ck.raw(base + w + ".weight_packed"),
                                                   self.ck.raw(base + w + ".weight_scale"), cols[w])).to(self.dtype)
                     for w in ("w1", "w3", "w2"))
        self._experts[key] = mats
        self._expert_bytes += sum(m.numel() * m.element_size() for m in mats)
        while self._expert_bytes > self._expert_cache_limit and len(self._experts) > 1:
            _, old = self._experts.popitem(last=False)
            self._expert_bytes -= sum(m.numel() * m.element_size() for m in old)
        return mats

    def embed(self, ids):
        V = self.cfg.vocab
        for t in ids:
            if not 0 <= t < V:
                raise CheckpointError(f"token id {t} outside the vocabulary 0..{V - 1}")
        name = PREFIX + "embed_tokens.weight"
        rows = np.asarray(self.ck.raw(name)[list(ids)])
        return torch.from_numpy(to_float64(rows, self.ck.entry(name).dtype)).to(self.dtype)

    def A_log(self, i):
        return self.lw(i, "self_attn.A_log")[: self.cfg.kda_H]   # §2: only the first H are used

    # ------------------------------------------------------------------ recurrent form

    def new_state(self):
        c = self.cfg
        st = {"pos": 0, "layers": []}
        C = c.kda_H * c.kda_D
        for i in range(c.n_layers):
            if c.is_mla(i):
                st["layers"].append({"c": torch.zeros(0, c.kv_lora, dtype=self.dtype),
                                     "kr": torch.zeros(0, c.qk_rope, dtype=self.dtype)})
            else:
                st["layers"].append({"S": torch.zeros(c.kda_H, c.kda_D, c.kda_D, dtype=self.dtype),
                                     "conv": [torch.zeros(C, c.conv_K - 1, dtype=self.dtype) for _ in range(3)]})
        return st

    def kda_step(self, i, x, ls):
        """§3 KDA, one token, steps 1-6; ls carries S and the conv history."""
        c = self.cfg
        H, D = c.kda_H, c.kda_D
        a = "self_attn."
        qkv = []
        for j, n in enumerate(("q", "k", "v")):
            pre = self.lw(i, a + n + "_proj.weight") @ x
            ls["conv"][j], out = km.causal_conv_step(ls["conv"][j], pre, self.lw(i, a + n + "_conv1d.weight"))
            qkv.append(km.silu(out).reshape(H, D))
        q, k, v = qkv
        q = km.l2_normalise(q) * (D ** -0.5)
        k = km.l2_normalise(k)
        ft = self.lw(i, a + "f_b_proj.weight") @ (self.lw(i, a + "f_a_proj.weight") @ x)
        g = km.kda_gate(ft, self.A_log(i), self.lw(i, a + "dt_bias"), c.gate_lb, H, D)
        alpha = torch.exp(g)
        beta = torch.sigmoid(self.lw(i, a + "b_proj.weight") @ x)
        ls["S"], o = km.kda_recurrent_step(ls["S"], q, k, v, alpha, beta)
        gate = torch.sigmoid((self.lw(i, a + "g_proj.weight") @ x).reshape(H, D))
        y = km.rms_norm(o, self.lw(i, a + "o_norm.weight"), c.eps) * gate
        return self.lw(i, a + "o_proj.weight") @ y.reshape(-1)

    def _mla_heads(self, i):
        c = self.cfg
        kv_b = self.lw(i, "self_attn.kv_b_proj.weight").reshape(c.mla_H, c.qk_nope + c.v_head, c.kv_lora)
        return kv_b[:, : c.qk_nope, :], kv_b[:, c.qk_nope:, :]

    def mla_step(self, i, x, ls):
        """§3 MLA, one token, latent cache form (cache = normed c and k_r per position)."""
        c = self.cfg
        H, nope, rope = c.mla_H, c.qk_nope, c.qk_rope
        a = "self_attn."
        ql = km.rms_norm(self.lw(i, a + "q_a_proj.weight") @ x, self.lw(i, a + "q_a_layernorm.weight"), km.MLA_NORM_EPS)
        q = (self.lw(i, a + "q_b_proj.weight") @ ql).reshape(H, nope + rope)
        ckr = self.lw(i, a + "kv_a_proj_with_mqa.weight") @ x
        cn = km.rms_norm(ckr[: c.kv_lora], self.lw(i, a + "kv_a_layernorm.weight"), km.MLA_NORM_EPS)
        ls["c"] = torch.cat([ls["c"], cn.unsqueeze(0)])
        ls["kr"] = torch.cat([ls["kr"], ckr[c.kv_lora:].unsqueeze(0)])
        W_kb, W_vb = self._mla_heads(i)
        o = km.mla_attend_latent(q[:, :nope], q[:, nope:], ls["c"], ls["kr"], W_kb, W_vb, (nope + rope) ** -0.5)
        o = o.reshape(-1)
        if c.mla_gate:
            o = o * torch.sigmoid(self.lw(i, a + "g_proj.weight") @ x)
        return self.lw(i, a + "o_proj.weight") @ o

    def dense_mlp(self, i, x):
        """§3 dense layer: W_d SiTU(W_g x, W_u x)."""
        c = self.cfg
        g = x @ self.lw(i, "mlp.gate_proj.weight").T
        u = x @ self.lw(i, "mlp.up_proj.weight").T
        return km.situ(g, u, c.situ_beta, c.situ_lin_beta) @ self.lw(i, "mlp.down_proj.weight").T

    def shared_mlp(self, i, x):
        c = self.cfg
        if c.n_shared == 0:
            return torch.zeros_like(x)
        m = "block_sparse_moe.shared_experts."
        g = x @ self.lw(i, m + "gate_proj.weight").T
        u = x @ self.lw(i, m + "up_proj.weight").T
        return km.situ(g, u, c.situ_beta, c.situ_lin_beta) @ self.lw(i, m + "down_proj.weight").T

    def routing(self, i, x):
        c = self.cfg
        m = "block_sparse_moe.gate."
        return km.route(x, self.lw(i, m + "weight"), self.lw(i, m + "e_score_correction_bias"),
                        c.topk, c.renormalize, c.routed_scale)

    def expert_apply(self, i, e, z):
        """E_e(z) = W2_e SiTU(W1_e z, W3_e z), z [..., L]."""
        c = self.cfg
        W1, W3, W2 = self.expert(i, e)
        return km.situ(z @ W1.T, z @ W3.T, c.situ_beta, c.situ_lin_beta) @ W2.T

    def moe_finish(self, i, r, x):
        """§3 Stable LatentMoE step 3: RMSNorm on the aggregate, up-projection, plus shared."""
        c = self.cfg
        m = "block_sparse_moe."
        if c.latent_norm:
            r = km.rms_norm(r, self.lw(i, m + "routed_expert_norm.weight"), c.eps)
        return r @ self.lw(i, m + "routed_expert_up_proj.weight").T + self.shared_mlp(i, x)

    def moe_step(self, i, x, trace):
        """§3 router + Stable LatentMoE for one token."""
        idx, w, margin = self.routing(i, x)
        if trace is not None:
            trace.append({"layer": i, "experts": idx, "weights": w.tolist(),
                          "margin": margin if math.isfinite(margin) else None})
        z = self.lw(i, "block_sparse_moe.routed_expert_down_proj.weight") @ x
        r = torch.zeros(self.cfg.L, dtype=self.dtype)
        for j, e in enumerate(idx):
            r = r + w[j] * self.expert_apply(i, e, z)
        return self.moe_finish(i, r, x)

    def head(self, h):
        return km.rms_norm(h, self.w(PREFIX + "norm.weight"), self.cfg.eps) @ self.w(HEAD).T

    def step(self, state, token, trace=None):
        """§3 decoder for one token with carried state; returns logits [V]."""
        c = self.cfg
        P = self.embed([token])[0]
        bank = []
        for i in range(c.n_layers):
            ls = state["layers"][i]
            h = km.attn_res(P, bank, self.lw(i, "self_attention_res_proj.weight")[0],
                            self.lw(i, "self_attention_res_norm.weight"), c.eps) if bank else P
            if i % c.block == 0:
                bank.append(P)
                P = None
            x = km.rms_norm(h, self.lw(i, "input_layernorm.weight"), c.eps)
            a = self.mla_step(i, x, ls) if c.is_mla(i) else self.kda_step(i, x, ls)
            P = a if P is None else P + a
            h2 = km.attn_res(P, bank, self.lw(i, "mlp_res_proj.weight")[0], self.lw(i, "mlp_res_norm.weight"), c.eps)
            x2 = km.rms_norm(h2, self.lw(i, "post_attention_layernorm.weight"), c.eps)
            m = self.dense_mlp(i, x2) if c.is_dense(i) else self.moe_step(i, x2, trace)
            P = P + m
        h = km.attn_res(P, bank, self.w(PREFIX + "output_attn_res_proj.weight")[0],
                        self.w(PREFIX + "output_attn_res_norm.weight"), c.eps)
        state["pos"] += 1
        return self.head(h)

    # ------------------------------------------------------------------ whole-sequence form

    def kda_sequence(self, i, X, chunk):
        c = self.cfg
        H, D = c.kda_H, c.kda_D
        T = X.shape[0]
        a = "self_attn."
        qkv = []
        for n in ("q", "k", "v"):
            pre = X @ self.lw(i, a + n + "_proj.weight").T
            qkv.append(km.silu(km.causal_conv_sequence(pre, self.lw(i, a + n + "_conv1d.weight"))).reshape(T, H, D))
        q, k, v = qkv
        q = km.l2_normalise(q) * (D ** -0.5)
        k = km.l2_normalise(k)
        ft = (X @ self.lw(i, a + "f_a_proj.weight").T) @ self.lw(i, a + "f_b_proj.weight").T
        g = km.kda_gate(ft, self.A_log(i), self.lw(i, a + "dt_bias"), c.gate_lb, H, D)
        beta = torch.sigmoid(X @ self.lw(i, a + "b_proj.weight").T)
        S0 = torch.zeros(H, D, D, dtype=self.dtype)
        _, o = km.kda_chunked(S0, q, k, v, g, beta, chunk)
        gate = torch.sigmoid((X @ self.lw(i, a + "g_proj.weight").T).reshape(T, H, D))
        y = km.rms_norm(o, self.lw(i, a + "o_norm.weight"), c.eps) * gate
        return y.reshape(T, H * D) @ self.lw(i, a + "o_proj.weight").T

    def mla_sequence(self, i, X):
        c = self.cfg
        H, nope, rope = c.mla_H, c.qk_nope, c.qk_rope
        T = X.shape[0]
        a = "self_attn."
        ql = km.rms_norm(X @ self.lw(i, a + "q_a_proj.weight").T, self.lw(i, a + "q_a_layernorm.weight"),
                         km.MLA_NORM_EPS)
        q = (ql @ self.lw(i, a + "q_b_proj.weight").T).reshape(T, H, nope + rope)
        ckr = X @ self.lw(i, a + "kv_a_proj_with_mqa.weight").T
        cn = km.rms_norm(ckr[:, : c.kv_lora], self.lw(i, a + "kv_a_layernorm.weight"), km.MLA_NORM_EPS)
        o = km.mla_attend_expanded(q, cn, ckr[:, c.kv_lora:], self.lw(i, a + "kv_b_proj.weight"),
                                   H, nope, c.v_head, (nope + rope) ** -0.5).reshape(T, -1)
        if c.mla_gate:
            o = o * torch.sigmoid(X @ self.lw(i, a + "g_proj.weight").T)
        return o @ self.lw(i, a + "o_proj.weight").T

    def moe_sequence(self, i, X):
        """Router per token, then each chosen expert once over all tokens that picked it."""
        T = X.shape[0]
        routes = [self.routing(i, X[t]) for t in range(T)]
        Z = X @ self.lw(i, "block_sparse_moe.routed_expert_down_proj.weight").T
        users = collections.defaultdict(list)
        for t, (idx, _, _) in enumerate(routes):
            for j, e in enumerate(idx):
                users[e].append((t, j))
        contrib = torch.zeros(T, self.cfg.topk, self.cfg.L, dtype=self.dtype)
        for e, tj in sorted(users.items()):
            ts = [t for t, _ in tj]
            out = self.expert_apply(i, e, Z[ts])
            for n, (t, j) in enumerate(tj):
                contrib[t, j] = routes[t][1][j] * out[n]
        R = contrib.sum(dim=1)
        return self.moe_finish(i, R, X)

    def forward_sequence(self, ids, chunk=16):
        """§3 over the whole prefix from zero state; returns logits [T, V]."""
        c = self.cfg
        P = self.embed(ids)
        bank = []
        for i in range(c.n_layers):
            h = km.attn_res(P, bank, self.lw(i, "self_attention_res_proj.weight")[0],
                            self.lw(i, "self_attention_res_norm.weight"), c.eps) if bank else P
            if i % c.block == 0:
                bank.append(P)
                P = None
            X = km.rms_norm(h, self.lw(i, "input_layernorm.weight"), c.eps)
            A = self.mla_sequence(i, X) if c.is_mla(i) else self.kda_sequence(i, X, chunk)
            P = A if P is None else P + A
            h2 = km.attn_res(P, bank, self.lw(i, "mlp_res_proj.weight")[0], self.lw(i, "mlp_res_norm.weight"), c.eps)
            X2 = km.rms_norm(h2, self.lw(i, "post_attention_layernorm.weight"), c.eps)
            M = self.dense_mlp(i, X2) if c.is_dense(i) else self.moe_sequence(i, X2)
            P = P + M
        h = km.attn_res(P, bank, self.w(PREFIX + "output_attn_res_proj.weight")[0],
                        self.w(PREFIX + "output_attn_res_norm.weight"), c.eps)
        return self.head(h)


def argmax_first(logits):
    """Index of the maximum, the lowest index on ties (greedy selection)."""
    m = torch.max(logits)
    return int(torch.nonzero(logits == m)[0, 0])


def is_finite(t):
    return bool(torch.isfinite(t).all())


