"""The K3 text-model geometry from config.json (docs/model-spec.md §1).

Language-model keys are read from `text_config` when present, else from the root (flat
config). KDA keys are read from the `linear_attn_config` object found in that same place.
Every key of the §1 table is required; a missing or out-of-range key is refused by name.
"""

from k3_checkpoint import CheckpointError


class ConfigError(CheckpointError):
    pass


_MISSING = object()


class K3Config:
    def __init__(self, doc, where="config.json"):
        if not isinstance(doc, dict):
            raise ConfigError(f"{where}: top level is not an object")
        text = doc.get("text_config", doc)
        if not isinstance(text, dict):
            raise ConfigError(f"{where}: text_config is not an object")
        prefix = "text_config." if "text_config" in doc else ""
        lin = text.get("linear_attn_config", _MISSING)
        if not isinstance(lin, dict):
            raise ConfigError(f"{where}: missing key {prefix}linear_attn_config (object)")

        def req(obj, key, kind, pfx):
            v = obj.get(key, _MISSING)
            if v is _MISSING or v is None:
                raise ConfigError(f"{where}: missing key {pfx}{key}")
            if kind is bool:
                if isinstance(v, bool) or v in (0, 1):
                    return bool(v)
                raise ConfigError(f"{where}: key {pfx}{key} must be a boolean, got {v!r}")
            if kind is int:
                if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
                    raise ConfigError(f"{where}: key {pfx}{key} must be an integer, got {v!r}")
                return int(v)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ConfigError(f"{where}: key {pfx}{key} must be a number, got {v!r}")
            return float(v)

        t = lambda key, kind: req(text, key, kind, prefix)  # noqa: E731
        lp = prefix + "linear_attn_config."
        lk = lambda key, kind: req(lin, key, kind, lp)  # noqa: E731

        self.E = t("hidden_size", int)
        self.n_layers = t("num_hidden_layers", int)
        self.vocab = t("vocab_size", int)
        self.eps = t("rms_norm_eps", float)

        fal = lin.get("full_attn_layers", _MISSING)
        if fal is _MISSING or not isinstance(fal, list):
            raise ConfigError(f"{where}: missing key {lp}full_attn_layers (list)")
        one_based = []
        for v in fal:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= self.n_layers:
                raise ConfigError(f"{where}: key {lp}full_attn_layers: entry {v!r} is outside "
                                  f"1..{self.n_layers} (the list is 1-based)")
            one_based.append(v)
        # full_attn_layers is 1-BASED: layer i (0-based) is MLA iff i+1 is listed.
        self.mla_layers = sorted({v - 1 for v in one_based})
        self.kda_H = lk("num_heads", int)
        self.kda_D = lk("head_dim", int)
        self.conv_K = lk("short_conv_kernel_size", int)
        self.gate_lb = lk("gate_lower_bound", float)

        self.mla_H = t("num_attention_heads", int)
        self.q_lora = t("q_lora_rank", int)
        self.kv_lora = t("kv_lora_rank", int)
        self.qk_nope = t("qk_nope_head_dim", int)
        self.qk_rope = t("qk_rope_head_dim", int)
        self.v_head = t("v_head_dim", int)
        self.mla_gate = t("mla_use_output_gate", bool)

        self.n_experts = t("num_experts", int)
        self.topk = t("num_experts_per_token", int)
        self.n_shared = t("num_shared_experts", int)
        self.I = t("moe_intermediate_size", int)
        self.L = t("routed_expert_hidden_size", int)
        self.latent_norm = t("latent_moe_use_norm", bool)
        self.renormalize = t("moe_renormalize", bool)
        self.routed_scale = t("routed_scaling_factor", float)
        self.first_dense = t("first_k_dense_replace", int)
        self.dense_I = t("intermediate_size", int)
        self.block = t("attn_res_block_size", int)
        self.situ_beta = t("activation_situ_beta", float)
        self.situ_lin_beta = t("activation_situ_linear_beta", float)

        self.eos_ids = _token_ids(doc, text, "eos_token_id")
        self.bos_ids = _token_ids(doc, text, "bos_token_id")

        positive = dict(hidden_size=self.E, num_hidden_layers=self.n_layers, vocab_size=self.vocab,
                        num_heads=self.kda_H, head_dim=self.kda_D, short_conv_kernel_size=self.conv_K,
                        num_experts_per_token=self.topk, attn_res_block_size=self.block)
        for k, v in positive.items():
            if v <= 0:
                raise ConfigError(f"{where}: key {k} must be positive, got {v}")
        if self.mla_layers:
            for k in ("num_attention_heads", "q_lora_rank", "kv_lora_rank", "v_head_dim"):
                if t(k, int) <= 0:
                    raise ConfigError(f"{where}: key {prefix}{k} must be positive")
        if self.first_dense < self.n_layers:
            if not 0 < self.topk <= self.n_experts:
                raise ConfigError(f"{where}: key {prefix}num_experts_per_token={self.topk} must be in "
                                  f"1..num_experts={self.n_experts}")
            if self.I % 32 or self.L % 32:
                raise ConfigError(f"{where}: moe_intermediate_size and routed_expert_hidden_size must be "
                                  "multiples of the MXFP4 group (32)")
        if not 0.0 < self.eps < 1.0:
            raise ConfigError(f"{where}: key {prefix}rms_norm_eps={self.eps} out of range")
        if self.situ_beta <= 0 or self.situ_lin_beta <= 0:
            raise ConfigError(f"{where}: SiTU betas must be positive")

    def is_mla(self, i):
        return i in self._mla_set

    @property
    def _mla_set(self):
        s = getattr(self, "_mla_cache", None)
        if s is None:
            s = self._mla_cache = frozenset(self.mla_layers)
        return s

    def is_dense(self, i):
        return i < self.first_dense

    def layer_kinds(self):
        return "".join(("M" if self.is_mla(i) else "K") + ("d" if self.is_dense(i) else "")
                       for i in range(self.n_layers))


def _token_ids(doc, text, key):
    for obj in (doc, text):
        v = obj.get(key)
        if v is None:
            continue
        if isinstance(v, list):
            return [int(x) for x in v]
        return [int(v)]
    return []
