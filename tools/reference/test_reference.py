#!/usr/bin/python3
"""Self-checks of the K3 reference. Run: /usr/bin/python3 -m unittest -v test_reference
(from tools/reference) or /usr/bin/python3 tools/reference/test_reference.py.

Expectations are computed by hand or by an independent expansion, never by the code under test.
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import k3_math as km  # noqa: E402
import make_test_checkpoint as mtc  # noqa: E402
from k3_checkpoint import CheckpointError, mxfp4_decode, read_safetensors_header  # noqa: E402
from k3_config import ConfigError, K3Config  # noqa: E402
from k3_model import K3Model, argmax_first  # noqa: E402

torch.set_num_threads(1)
F64 = torch.float64


def rel_err(a, b):
    return float((a - b).abs().max() / b.abs().max())


class TestMxfp4(unittest.TestCase):
    def test_hand_built_row(self):
        # 64 columns = 2 groups. Bytes: low nibble = even column, high nibble = odd column.
        packed = np.zeros((2, 32), dtype=np.uint8)
        packed[0, 0] = 0x21      # col0 code 1 (0.5), col1 code 2 (1.0)
        packed[0, 1] = 0xF8      # col2 code 8 (-0), col3 code 15 (-6)
        packed[0, 15] = 0x7A     # col30 code 10 (-1), col31 code 7 (6)
        packed[0, 16] = 0x93     # col32 code 3 (1.5), col33 code 9 (-0.5)
        packed[1, :] = 0x66      # row 1: every column code 6 (4.0)
        scale = np.array([[128, 125], [255, 127]], dtype=np.uint8)  # x2, x1/4 ; group zeroed, x1
        W = mxfp4_decode(packed, scale)
        self.assertEqual(W.shape, (2, 64))
        exp0 = np.zeros(64)
        exp0[0], exp0[1], exp0[2], exp0[3] = 0.5 * 2, 1.0 * 2, -0.0, -6.0 * 2
        exp0[30], exp0[31] = -1.0 * 2, 6.0 * 2
        exp0[32], exp0[33] = 1.5 / 4, -0.5 / 4
        np.testing.assert_array_equal(W[0], exp0)
        self.assertTrue(math.copysign(1.0, W[0, 2]) < 0)   # code 8 is -0
        np.testing.assert_array_equal(W[1, :32], np.zeros(32))  # scale 255 -> group contributes 0
        np.testing.assert_array_equal(W[1, 32:], np.full(32, 4.0))

    def test_table(self):
        packed = np.array([[0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE] + [0] * 8], dtype=np.uint8)
        W = mxfp4_decode(packed, np.array([[127]], dtype=np.uint8))
        want = [0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6] + [0] * 16
        np.testing.assert_array_equal(W[0], np.array(want))

    def test_odd_width_rounds_up(self):
        # 35 columns: 18 code bytes (the last high nibble unused), 2 scale groups (the last
        # holds 3 columns).
        packed = np.full((1, 18), 0x22, dtype=np.uint8)   # every code 2 (1.0)
        packed[0, 17] = 0xF3                               # col34 code 3 (1.5); the 0xF nibble is padding
        W = mxfp4_decode(packed, np.array([[127, 128]], dtype=np.uint8), cols=35)
        self.assertEqual(W.shape, (1, 35))
        np.testing.assert_array_equal(W[0, :32], np.ones(32))
        np.testing.assert_array_equal(W[0, 32:], np.array([2.0, 2.0, 3.0]))
        with self.assertRaises(CheckpointError):
            mxfp4_decode(packed, np.array([[127]], dtype=np.uint8), cols=35)


class TestBlocks(unittest.TestCase):
    def test_attn_res_two_rows_by_hand(self):
        b0 = torch.tensor([3.0, 4.0], dtype=F64)
        P = torch.tensor([1.0, -1.0], dtype=F64)
        norm_w = torch.tensor([1.0, 2.0], dtype=F64)
        proj_w = torch.tensor([0.5, 0.25], dtype=F64)
        eps = 0.5
        # mean(b0^2) = 12.5 -> K0 = b0/sqrt(13); mean(P^2) = 1 -> K1 = P/sqrt(1.5); fold = [0.5, 0.5]
        s0 = 0.5 * (3 + 4) / math.sqrt(13.0)
        s1 = 0.5 * (1 - 1) / math.sqrt(1.5)
        p0 = math.exp(s0) / (math.exp(s0) + math.exp(s1))
        want = [p0 * 3 + (1 - p0) * 1, p0 * 4 + (1 - p0) * -1]
        got = km.attn_res(P, [b0], proj_w, norm_w, eps)
        self.assertAlmostEqual(got[0].item(), want[0], places=14)
        self.assertAlmostEqual(got[1].item(), want[1], places=14)

    def test_kda_step_against_expanded_formula(self):
        g = torch.Generator().manual_seed(3)
        H, D = 2, 3
        S = torch.randn(H, D, D, generator=g, dtype=F64)
        q, k, v = (torch.randn(H, D, generator=g, dtype=F64) for _ in range(3))
        alpha = torch.rand(H, D, generator=g, dtype=F64)
        beta = torch.rand(H, generator=g, dtype=F64)
        S_new, o = km.kda_recurrent_step(S.clone(), q, k, v, alpha, beta)
        for h in range(H):
            # S_t = (I - b k k^T) diag(alpha) S_{t-1} + b k v^T ; o = S_t^T q  (Kimi Linear Eq. 1)
            for a in range(D):
                for c in range(D):
                    acc = sum(((1.0 if a == j else 0.0) - beta[h].item() * k[h, a].item() * k[h, j].item())
                              * alpha[h, j].item() * S[h, j, c].item() for j in range(D))
                    acc += beta[h].item() * k[h, a].item() * v[h, c].item()
                    self.assertAlmostEqual(S_new[h, a, c].item(), acc, places=13)
            for c in range(D):
                want = sum(S_new[h, a, c].item() * q[h, a].item() for a in range(D))
                self.assertAlmostEqual(o[h, c].item(), want, places=13)

    def test_kda_chunk_form_equals_recurrence(self):
        g = torch.Generator().manual_seed(5)
        T, H, D = 11, 2, 4
        q = km.l2_normalise(torch.randn(T, H, D, generator=g, dtype=F64))
        k = km.l2_normalise(torch.randn(T, H, D, generator=g, dtype=F64))
        v = torch.randn(T, H, D, generator=g, dtype=F64)
        gl = -5 * torch.rand(T, H, D, generator=g, dtype=F64)
        beta = torch.rand(T, H, generator=g, dtype=F64)
        S0 = torch.randn(H, D, D, generator=g, dtype=F64)
        S, outs = S0.clone(), []
        for t in range(T):
            S, o = km.kda_recurrent_step(S, q[t], k[t], v[t], torch.exp(gl[t]), beta[t])
            outs.append(o)
        for chunk in (1, 3, 4, 64):
            Sc, oc = km.kda_chunked(S0, q, k, v, gl, beta, chunk)
            self.assertLess(rel_err(oc, torch.stack(outs)), 1e-13, chunk)
            self.assertLess(rel_err(Sc, S), 1e-13, chunk)

    def test_conv_tap_order(self):
        w = torch.tensor([[[1.0, 10.0, 100.0, 1000.0]]], dtype=F64)   # tap 3 = current token
        hist = torch.zeros(1, 3, dtype=F64)
        outs = []
        for x in (1.0, 2.0, 3.0, 4.0, 5.0):
            hist, o = km.causal_conv_step(hist, torch.tensor([x], dtype=F64), w)
            outs.append(o.item())
        self.assertEqual(outs, [1000.0, 2100.0, 3210.0, 4321.0, 5432.0])
        seq = km.causal_conv_sequence(torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0]], dtype=F64), w)
        self.assertEqual(seq[:, 0].tolist(), outs)

    def test_mla_latent_equals_expanded(self):
        g = torch.Generator().manual_seed(7)
        T, H, nope, rope, vd, kl = 6, 3, 5, 2, 4, 7
        q = torch.randn(T, H, nope + rope, generator=g, dtype=F64)
        c = torch.randn(T, kl, generator=g, dtype=F64)
        kr = torch.randn(T, rope, generator=g, dtype=F64)
        kv_b = torch.randn(H * (nope + vd), kl, generator=g, dtype=F64)
        scale = (nope + rope) ** -0.5
        full = km.mla_attend_expanded(q, c, kr, kv_b, H, nope, vd, scale)
        heads = kv_b.reshape(H, nope + vd, kl)
        for t in range(T):
            lat = km.mla_attend_latent(q[t, :, :nope], q[t, :, nope:], c[: t + 1], kr[: t + 1],
                                       heads[:, :nope], heads[:, nope:], scale)
            self.assertLess(rel_err(lat, full[t]), 1e-13)
        # position 0 attends only to itself: o_h = v_h(0)
        v0 = (kv_b @ c[0]).reshape(H, nope + vd)[:, nope:]
        self.assertLess(rel_err(full[0], v0), 1e-14)

    def test_router_ties_bias_and_weights(self):
        W = torch.zeros(5, 2, dtype=F64)
        W[:, 0] = torch.tensor([1.0, 2.0, 2.0, 0.0, 2.0], dtype=F64)
        x = torch.tensor([1.0, 0.0], dtype=F64)
        bias = torch.zeros(5, dtype=F64)
        idx, w, _ = km.route(x, W, bias, 2, True, 1.0)
        self.assertEqual(idx, [1, 2])                   # three-way tie at 2.0: lowest ids first
        self.assertAlmostEqual(w.sum().item(), 1.0, places=15)
        bias[3] = 0.9                                   # sigmoid(0)+0.9 = 1.4 > sigmoid(2) = 0.88
        idx, w, margin = km.route(x, W, bias, 2, True, 2.5)
        self.assertEqual(idx, [3, 1])
        s3, s1 = 0.5, 1 / (1 + math.exp(-2.0))          # weights use the UNBIASED scores
        self.assertAlmostEqual(w[0].item(), 2.5 * s3 / (s3 + s1 + 1e-20), places=14)
        self.assertAlmostEqual(w[1].item(), 2.5 * s1 / (s3 + s1 + 1e-20), places=14)
        self.assertEqual(margin, 0.0)                   # expert 2 ties expert 1 for the last slot
        idx, w, _ = km.route(x, W, bias, 2, False, 1.0)
        self.assertAlmostEqual(w[0].item(), 0.5, places=15)

    def test_route_batch_equals_route(self):
        g = torch.Generator().manual_seed(3)
        X = torch.randn(40, 8, dtype=F64, generator=g)
        W = torch.randn(12, 8, dtype=F64, generator=g)
        bias = 0.1 * torch.randn(12, dtype=F64, generator=g)
        for renorm, k, scale in ((True, 4, 1.0), (False, 3, 2.5), (True, 1, 1.0)):
            idx, w = km.route_batch(X, W, bias, k, renorm, scale)
            for t in range(X.shape[0]):
                ri, rw, _ = km.route(X[t], W, bias, k, renorm, scale)
                self.assertEqual(idx[t].tolist(), ri)
                self.assertTrue(torch.allclose(w[t], rw, rtol=1e-13, atol=0))   # matmul vs matvec rounding

    def test_situ(self):
        g = torch.tensor([10.0, -3.0], dtype=F64)
        u = torch.tensor([1000.0, 0.5], dtype=F64)
        got = km.situ(g, u, 4.0, 25.0)
        for i in range(2):
            gi, ui = g[i].item(), u[i].item()
            want = 4 * math.tanh(gi / 4) / (1 + math.exp(-gi)) * 25 * math.tanh(ui / 25)
            self.assertAlmostEqual(got[i].item(), want, places=12)
        self.assertLessEqual(float(km.situ(torch.tensor([1e9], dtype=F64), torch.tensor([1e9], dtype=F64),
                                           4.0, 25.0)), 100.0)


class TestSafetensors(unittest.TestCase):
    def test_header_that_lies_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.safetensors")
            hdr = json.dumps({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}).encode()
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(hdr)) + hdr + b"\0" * 16)
            with self.assertRaisesRegex(CheckpointError, "tensor a"):
                read_safetensors_header(path)
            hdr = json.dumps({"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}).encode()
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(hdr)) + hdr + b"\0" * 16)
            with self.assertRaisesRegex(CheckpointError, "past the end"):
                read_safetensors_header(path)


class TestModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "tiny")
        mtc.main([cls.dir, "--seed", "11", "--shards", "3"])
        cls.model = K3Model(cls.dir)
        cls.ids = [(37 * i + 5) % 384 for i in range(20)]
        st = cls.model.new_state()
        cls.step_logits = torch.stack([cls.model.step(st, t) for t in cls.ids])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_layer_map_is_one_based(self):
        self.assertEqual(self.model.cfg.mla_layers, [2, 5, 6])
        self.assertEqual(self.model.cfg.layer_kinds(), "KdKMKKMM")

    def test_incremental_equals_recompute(self):
        for chunk in (1, 4, 16, 64):
            full = self.model.forward_sequence(self.ids, chunk)
            self.assertLess(rel_err(full, self.step_logits), 1e-12, chunk)
        for n in (1, 2, 7, 13):
            last = self.model.forward_sequence(self.ids[:n], 5)[-1]
            self.assertLess(rel_err(last, self.step_logits[n - 1]), 1e-12, n)

    def test_logits_are_informative(self):
        self.assertTrue(bool(torch.isfinite(self.step_logits).all()))
        self.assertGreater(float(self.step_logits.std()), 0.1)
        self.assertGreater(len({argmax_first(r) for r in self.step_logits}), 3)

    def test_A_log_padding_is_ignored(self):
        name = "language_model.model.layers.0.self_attn.A_log"
        m = K3Model(self.dir)
        orig = m.w(name).clone()
        H = m.cfg.kda_H
        self.assertGreater(orig.numel(), H)
        m._cache[name] = torch.cat([orig[:H], torch.full((orig.numel() - H,), 123.0, dtype=F64)])
        st = m.new_state()
        out = torch.stack([m.step(st, t) for t in self.ids[:5]])
        self.assertTrue(torch.equal(out, self.step_logits[:5]))
        m._cache[name] = torch.cat([orig[:H] + 0.5, orig[H:]])     # the used entries do matter
        st = m.new_state()
        out = torch.stack([m.step(st, t) for t in self.ids[:5]])
        self.assertFalse(torch.equal(out, self.step_logits[:5]))

    def test_flat_config_gives_same_model(self):
        with tempfile.TemporaryDirectory() as d:
            mtc.main([d, "--seed", "11", "--shards", "1", "--flat"])
            m = K3Model(d)
            st = m.new_state()
            out = torch.stack([m.step(st, t) for t in self.ids[:6]])
            self.assertTrue(torch.equal(out, self.step_logits[:6]))

    def test_config_refusals_name_the_key(self):
        with open(os.path.join(self.dir, "config.json")) as f:
            doc = json.load(f)
        bad = json.loads(json.dumps(doc))
        del bad["text_config"]["routed_expert_hidden_size"]
        with self.assertRaisesRegex(ConfigError, "text_config.routed_expert_hidden_size"):
            K3Config(bad)
        bad = json.loads(json.dumps(doc))
        bad["text_config"]["linear_attn_config"]["full_attn_layers"] = [0, 3]
        with self.assertRaisesRegex(ConfigError, "full_attn_layers.*1-based"):
            K3Config(bad)
        bad = json.loads(json.dumps(doc))
        del bad["text_config"]["linear_attn_config"]["gate_lower_bound"]
        with self.assertRaisesRegex(ConfigError, "linear_attn_config.gate_lower_bound"):
            K3Config(bad)

    def test_cli_outputs(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            ids = ",".join(str(t) for t in self.ids[:8])
            subprocess.run([sys.executable, os.path.join(HERE, "k3_reference.py"), self.dir, "--ids", ids,
                            "--generate", "5", "--out", out, "--dump-routing"], check=True, capture_output=True)
            with open(out) as f:
                rep = json.load(f)
            V = self.model.cfg.vocab
            rows = rep["logits"]["shape"][0]
            logits = np.fromfile(os.path.join(d, rep["logits"]["file"]), dtype="<f8").reshape(rows, V)
            np.testing.assert_array_equal(logits[:8], self.step_logits[:8].numpy())
            self.assertEqual(rep["row_tokens"][:8], self.ids[:8])
            self.assertEqual(rep["argmax"], [int(np.argmax(r)) for r in logits])
            gen = rep["generated_ids"]
            self.assertEqual(len(gen), 5 if V - 1 not in gen else gen.index(V - 1) + 1)
            self.assertEqual(gen[0], rep["argmax"][7])
            self.assertEqual(rep["row_tokens"][8:], gen[:-1])
            self.assertEqual(len(rep["routing"]), rows)
            self.assertEqual(len(rep["routing"][0]["layers"]), 6)      # MoE layers 1..6
            bad = subprocess.run([sys.executable, os.path.join(HERE, "k3_reference.py"), self.dir, "--ids", "1,99999"],
                                 capture_output=True, text=True)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("99999", bad.stderr)


class TestGeometryVariants(unittest.TestCase):
    """Other shapes of the layer map and MoE options; each must keep step == whole-sequence form."""

    VARIANTS = {
        # MLA at layer 0 and dense for two layers, block size 3, top-4 of 16 with 2 shared, scale 1.5
        "mla_first": ["linear_attn_config.full_attn_layers=[1,4]", "num_hidden_layers=5",
                      "first_k_dense_replace=2", "attn_res_block_size=3", "num_shared_experts=2",
                      "routed_scaling_factor=1.5", "rms_norm_eps=1e-6", "linear_attn_config.num_heads=3"],
        # no MLA output gate, no latent norm, no renormalisation, top-1, no shared experts, block size 1
        "options_off": ["mla_use_output_gate=false", "latent_moe_use_norm=false", "moe_renormalize=false",
                        "num_experts_per_token=1", "num_shared_experts=0", "attn_res_block_size=1"],
        # every layer KDA, block size larger than the depth
        "all_kda": ["linear_attn_config.full_attn_layers=[]", "attn_res_block_size=12"],
    }

    def test_variants(self):
        ids = [(29 * i + 11) % 384 for i in range(13)]
        for name, sets in self.VARIANTS.items():
            with self.subTest(name), tempfile.TemporaryDirectory() as d:
                argv = [d, "--seed", "23", "--shards", "1"]
                for s in sets:
                    argv += ["--set", s]
                mtc.main(argv)
                m = K3Model(d)
                st = m.new_state()
                step = torch.stack([m.step(st, t) for t in ids])
                self.assertTrue(bool(torch.isfinite(step).all()))
                self.assertLess(rel_err(m.forward_sequence(ids, 4), step), 1e-12)


if __name__ == "__main__":
    unittest.main()
