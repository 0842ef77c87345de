"""The blocks of the K3 forward pass as plain functions on torch tensors (docs/model-spec.md §3).

Each function is written from the spec text; the section it implements is named in its
docstring. Two forms exist where the engine has two: a per-token recurrent form (what
decoding runs) and a whole-sequence form (used as an independent cross-check).
"""

import math

import torch

L2_EPS = 1e-6        # §3 KDA step 2: x / sqrt(sum x^2 + 1e-6)
MLA_NORM_EPS = 1e-6  # §3 MLA steps 1-2: q_a_layernorm and kv_a_layernorm
RENORM_EPS = 1e-20   # §3 router step 1


def rms_norm(x, w, eps):
    """RMSNorm(x; w, eps) = w * x / sqrt(mean(x^2) + eps), over the last axis."""
    return w * (x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps))


def silu(x):
    return x * torch.sigmoid(x)


def situ(g, u, beta, lin_beta):
    """§3 SiTU(g, u) = [beta*tanh(g/beta)*sigmoid(g)] * [lin_beta*tanh(u/lin_beta)]; sigmoid sees raw g."""
    return (beta * torch.tanh(g / beta) * torch.sigmoid(g)) * (lin_beta * torch.tanh(u / lin_beta))


def attn_res(P, bank, proj_w, norm_w, eps):
    """§3 AttnRes AR(P, bank; proj, norm).

    Rows V = [bank_0 .. bank_{n-1}, P]; K_r = V_r / sqrt(mean(V_r^2) + eps) (no weight);
    score_r = sum_d K_r[d] * norm_w[d] * proj_w[d]; p = softmax(score); out = sum_r p_r V_r.
    Works on one position ([E] rows) or on a batch of positions ([T, E] rows).
    """
    V = torch.stack(list(bank) + [P], dim=0)                      # [n+1, ..., E]
    K = V / torch.sqrt((V * V).mean(dim=-1, keepdim=True) + eps)
    score = (K * (norm_w * proj_w)).sum(dim=-1)                    # [n+1, ...]
    p = torch.softmax(score, dim=0)
    return (p.unsqueeze(-1) * V).sum(dim=0)


# ---------------------------------------------------------------------------------- KDA

def kda_gate(xf, A_log_h, dt_bias, lb, H, D):
    """§3 KDA step 3: g = lb * sigmoid(exp(A_log[h]) * (W_fb(W_fa x)[c] + dt_bias[c])); returns g [.., H, D]."""
    z = xf.reshape(*xf.shape[:-1], H, D) + dt_bias.reshape(H, D)
    return lb * torch.sigmoid(torch.exp(A_log_h).reshape(H, 1) * z)


def l2_normalise(x):
    """§3 KDA step 2: per head x / sqrt(sum x^2 + 1e-6)."""
    return x / torch.sqrt((x * x).sum(dim=-1, keepdim=True) + L2_EPS)


def kda_recurrent_step(S, q, k, v, alpha, beta):
    """§3 KDA step 5, one token, all heads. S [H, Dk, Dv] (key axis x value axis).

    S <- diag(alpha) S;  u = v - S^T k;  S <- S + beta k u^T;  o = S^T q.  Returns (S, o).
    """
    S = alpha.unsqueeze(-1) * S
    u = v - torch.einsum("hkv,hk->hv", S, k)
    S = S + beta.reshape(-1, 1, 1) * k.unsqueeze(-1) * u.unsqueeze(-2)
    o = torch.einsum("hkv,hk->hv", S, q)
    return S, o


def pair_einsum(x, decay, k):
    """sum_d x[h,i,d] * decay[h,i,j,d] * k[h,j,d] -> [h,i,j] (the reference's contraction)."""
    return torch.einsum("hik,hijk,hjk->hij", x, decay, k)


def pair_elementwise(x, decay, k):
    """The same sum as pair_einsum, multiplied out then summed: ~3x faster on CPU with autograd
    (training uses it); it rounds differently, so the reference keeps pair_einsum."""
    return (x.unsqueeze(2) * decay * k.unsqueeze(1)).sum(dim=-1)


def kda_chunked(S0, q, k, v, g, beta, chunk, pair=pair_einsum):
    """The same recurrence as kda_recurrent_step over a whole sequence, in the chunk (WY) form.

    Independent derivation (see README): within a chunk with inclusive cumulative log-decay
    G_i, pseudo-values U' solve (I + diag(beta) A) U' = diag(beta) (V - (e^G * K) S0) with
    A[i,j] = <k_i * e^(G_i - G_j), k_j> for j < i; then
    o_i = S0^T (e^G_i * q_i) + sum_{j<=i} <q_i * e^(G_i - G_j), k_j> U'_j and
    S_end = diag(e^G_last) S0 + sum_j (e^(G_last - G_j) * k_j) U'_j^T.
    q, k, g: [T, H, Dk]; v: [T, H, Dv]; beta [T, H]; S0 [H, Dk, Dv]. Returns (S_end, o [T, H, Dv]).
    `pair` is the <a * decay, b> contraction (pair_einsum unless a caller trades rounding for speed).
    """
    T = q.shape[0]
    S = S0
    outs = []
    for c0 in range(0, T, chunk):
        qc, kc, vc, gc, bc = (t[c0:c0 + chunk].transpose(0, 1) for t in (q, k, v, g, beta))
        # qc [H, C, Dk], vc [H, C, Dv], bc [H, C]
        C = qc.shape[1]
        G = torch.cumsum(gc, dim=1)                                      # [H, C, Dk]
        diff = G.unsqueeze(2) - G.unsqueeze(1)                           # [H, i, j, Dk] = G_i - G_j
        incl = torch.tril(torch.ones(C, C, dtype=torch.bool))
        diff = torch.where(incl.reshape(1, C, C, 1), diff, torch.full_like(diff, -math.inf))
        decay = torch.exp(diff)                                          # 0 above the diagonal
        A = pair(kc, decay, kc)
        A = torch.tril(A, diagonal=-1)
        Aqk = pair(qc, decay, kc)                                        # diagonal kept
        eye = torch.eye(C, dtype=q.dtype).expand_as(A)
        M = eye + bc.unsqueeze(-1) * A
        rhs = bc.unsqueeze(-1) * (vc - torch.einsum("hik,hkv->hiv", torch.exp(G) * kc, S))
        U = torch.linalg.solve_triangular(M, rhs, upper=False, unitriangular=True)
        o = torch.einsum("hik,hkv->hiv", torch.exp(G) * qc, S) + torch.einsum("hij,hjv->hiv", Aqk, U)
        outs.append(o.transpose(0, 1))
        Glast = G[:, -1:, :]
        S = torch.exp(Glast).transpose(1, 2) * S + torch.einsum(
            "hjk,hjv->hkv", torch.exp(Glast - G) * kc, U)
    return S, torch.cat(outs, dim=0)


def causal_conv_step(hist, x, w):
    """§3 KDA step 1 conv, one token. hist [C, K-1] = previous inputs (oldest first), x [C],
    w [C, 1, K]; tap K-1 is the current token. Returns (new_hist, out [C]) before SiLU."""
    window = torch.cat([hist, x.unsqueeze(-1)], dim=-1)                  # [C, K]
    out = (window * w[:, 0, :]).sum(dim=-1)
    return window[:, 1:], out


def causal_conv_sequence(x, w):
    """The same conv over a whole sequence with zero history. x [T, C] -> [T, C] before SiLU."""
    C, _, K = w.shape
    xt = torch.nn.functional.pad(x.transpose(0, 1).unsqueeze(0), (K - 1, 0))
    return torch.nn.functional.conv1d(xt, w, groups=C)[0].transpose(0, 1)


# ---------------------------------------------------------------------------------- MLA

def mla_attend_latent(q_nope, q_r, c_cache, kr_cache, W_kb, W_vb, scale):
    """§3 MLA step 3 in the latent form for one query over the cached positions.

    q_nope [H, nope], q_r [H, rope]; c_cache [S, kv_lora] (normed c); kr_cache [S, rope];
    W_kb [H, nope, kv_lora], W_vb [H, v, kv_lora] (the kv_b_proj rows of each head).
    score_{h,s} = (W_kb,h^T q_nope_h) . c_s + q_r_h . k_r_s, scaled; o_h = W_vb,h (sum_s p_s c_s).
    """
    q_lat = torch.einsum("hnc,hn->hc", W_kb, q_nope)                    # [H, kv_lora]
    score = (q_lat @ c_cache.T + q_r @ kr_cache.T) * scale               # [H, S]
    p = torch.softmax(score, dim=-1)
    ctx = p @ c_cache                                                     # [H, kv_lora]
    return torch.einsum("hvc,hc->hv", W_vb, ctx)                          # [H, v]


def mla_attend_expanded(q, c, k_r, kv_b, H, nope, vdim, scale):
    """§3 MLA step 3 over a whole sequence with per-head k and v expanded (causal).

    q [T, H, nope+rope]; c [T, kv_lora] (normed); k_r [T, rope]; kv_b [H*(nope+v), kv_lora].
    Returns o [T, H, v]."""
    T = q.shape[0]
    kv = (c @ kv_b.T).reshape(T, H, nope + vdim)
    k = torch.cat([kv[..., :nope], k_r.unsqueeze(1).expand(T, H, k_r.shape[-1])], dim=-1)
    v = kv[..., nope:]
    score = torch.einsum("thd,shd->hts", q, k) * scale                   # [H, T, S]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    score = score.masked_fill(mask, -math.inf)
    p = torch.softmax(score, dim=-1)
    return torch.einsum("hts,shv->thv", p, v)


# ---------------------------------------------------------------------------------- MoE

def route(x, W_gate, bias, topk, renormalize, scale):
    """§3 router step 1 for one token x [E].

    s = sigmoid(W_gate x); selection = top-k of s + bias, ties broken toward the lower expert id,
    in descending order; weights = unbiased s of the chosen, renormalised w/(sum w + 1e-20) when
    moe_renormalize and top-k > 1, times routed_scaling_factor.
    Returns (idx list, weights tensor [k], margin = choice[k-1] - choice[k] (inf if k == N)).
    """
    s = torch.sigmoid(W_gate @ x)
    choice = (s + bias).tolist()
    order = sorted(range(len(choice)), key=lambda e: (-choice[e], e))
    idx = order[:topk]
    w = s[idx]
    if renormalize and topk > 1:
        w = w / (w.sum() + RENORM_EPS)
    w = w * scale
    margin = choice[order[topk - 1]] - choice[order[topk]] if topk < len(choice) else math.inf
    return idx, w, margin


def route_batch(X, W_gate, bias, topk, renormalize, scale):
    """`route` for many tokens at once, X [T, E] (what training needs; same rule, vectorised).

    Returns (idx [T, k] long, weights [T, k]). Selection by torch.topk on s + bias is detached
    (top-k is not differentiable); gradients reach W_gate through the weights s of the chosen.
    Ties are measure-zero for trained float weights, so torch.topk's tie order is not pinned
    (`route` breaks them toward the lower id; test_reference checks the two agree without ties).
    """
    s = torch.sigmoid(X @ W_gate.T)
    idx = torch.topk((s + bias).detach(), topk, dim=-1, sorted=True).indices
    w = torch.gather(s, -1, idx)
    if renormalize and topk > 1:
        w = w / (w.sum(dim=-1, keepdim=True) + RENORM_EPS)
    return idx, w * scale
