"""Self-checks of the training recipe: /usr/bin/python3 -m unittest -v test_train (in tools/train)."""

import os
import subprocess
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

import bpe  # noqa: E402
import export  # noqa: E402
import perplexity  # noqa: E402
from k3_checkpoint import E2M1, mxfp4_decode  # noqa: E402
from model import K3Model, TrainModel, init_params, params_from_checkpoint  # noqa: E402

REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference")


class TestModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ck = os.path.join(cls.tmp.name, "ck")
        subprocess.run([sys.executable, os.path.join(REF, "make_test_checkpoint.py"), cls.ck, "--seed", "5"],
                       check=True, capture_output=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_batched_forward_equals_reference(self):
        """The training forward (batched KDA, vectorised router, batched experts) in float64
        gives the reference's logits for every sequence of a batch."""
        doc, params = params_from_checkpoint(self.ck)
        tm = TrainModel(doc, params, dtype=torch.float64)
        ref = K3Model(self.ck)
        V = ref.cfg.vocab
        g = torch.Generator().manual_seed(2)
        ids = torch.randint(0, V, (3, 37), generator=g)
        got = tm.forward_sequence(ids)
        for b in range(ids.shape[0]):
            want = ref.forward_sequence(ids[b].tolist())
            err = ((got[b] - want).abs().max() / want.abs().max()).item()
            self.assertLess(err, 1e-12, f"sequence {b}")


class TestExport(unittest.TestCase):
    def test_mxfp4_representable_values_round_trip(self):
        rng = np.random.default_rng(1)
        k = rng.integers(-6, 4, size=(6, 4, 1)).astype(np.float64)
        w = E2M1[rng.integers(0, 16, size=(6, 4, 32))] * np.exp2(k)
        w[:, :, 5] = 6.0 * np.exp2(k[:, :, 0])                   # the group maximum sets the scale
        w = w.reshape(6, 128)
        packed, scale = export.mxfp4_encode(w)
        np.testing.assert_array_equal(mxfp4_decode(packed, scale, 128), w)

    def test_mxfp4_rounds_to_nearest(self):
        rng = np.random.default_rng(2)
        w = rng.standard_normal((5, 64)) * np.exp2(rng.integers(-8, 3, size=(5, 1)))
        packed, scale = export.mxfp4_encode(w)
        got = mxfp4_decode(packed, scale, 64)
        for r in range(5):
            for g in range(2):
                grid = E2M1 * 2.0 ** (int(scale[r, g]) - 127)
                for c in range(32 * g, 32 * g + 32):
                    self.assertAlmostEqual(abs(got[r, c] - w[r, c]), np.abs(grid - w[r, c]).min(), places=15)
        self.assertTrue(np.all(np.abs(w).reshape(5, 2, 32).max(-1) / 2.0 ** (scale.astype(int) - 127) >= 4))

    def test_export_writes_what_training_holds(self):
        """Every exported tensor is the trained tensor after its format's rounding."""
        doc = {"text_config": dict(export.mtc.TINY, bos_token_id=382, eos_token_id=383)}
        from k3_config import K3Config
        params = init_params(K3Config(doc), 4)
        with tempfile.TemporaryDirectory() as d:
            for f in ("tiktoken.model", "tokenizer_config.json"):
                open(os.path.join(d, f), "w").close()
            out = os.path.join(d, "out")
            export.export(params, doc, d, out, 2)
            _, got = params_from_checkpoint(out)
        for name, t in params.items():
            t = t.detach().to(torch.float64)
            if ".experts." in name:
                want = torch.stack([torch.from_numpy(mxfp4_decode(*export.mxfp4_encode(m.numpy()), m.shape[1]))
                                    for m in t])
            elif name.endswith(export.F32_SUFFIXES):
                want = t.float().double()
            else:
                bits = export.mtc.bf16_bits(t.numpy()).astype(np.uint32) << 16
                want = torch.from_numpy(bits.view(np.float32).astype(np.float64))
            g = got[name][: t.shape[0]] if name.endswith(".A_log") else got[name]
            self.assertTrue(torch.equal(g, want), name)


class TestPerplexity(unittest.TestCase):
    def test_every_position_scored_once(self):
        for n in (2, 5, 256, 257, 300, 1000):
            for W, S in ((256, 128), (16, 5), (8, 7)):
                scored = []
                for k, (b, e, first) in enumerate(perplexity.windows(n, W, S)):
                    self.assertEqual(b, k * S)
                    self.assertEqual(e, min(b + W, n))
                    if k:
                        self.assertLessEqual(e - first, S)
                    scored += range(first, e)
                self.assertEqual(scored, list(range(1, n)), (n, W, S))

    def test_uniform_model_gives_vocab_size(self):
        V = 50
        ppl, _, count = perplexity.perplexity(list(range(40)), lambda w: torch.zeros(len(w), V), 16, 8)
        self.assertAlmostEqual(ppl, V, places=9)
        self.assertEqual(count, 39)


class TestBpe(unittest.TestCase):
    def test_round_trip_and_rank_order(self):
        text = "The cat sat on the mat. The cat's hat!\n\n  -- Someone, 1999\n" * 20
        toks = bpe.train(text, 300)
        self.assertEqual(toks[:256], [bytes([b]) for b in range(256)])
        self.assertEqual(len(set(toks)), len(toks))
        enc = bpe.Encoder(toks)
        ids = enc.encode(text)
        self.assertEqual(enc.decode(ids), text)
        self.assertLess(len(ids), len(text.encode()))

    def test_kimi_cuts(self):
        self.assertEqual(bpe.kimi_cut("abcdefgh", chunk=3, run=100), ["abc", "def", "gh"])
        self.assertEqual(bpe.kimi_cut("aaaaa  bb", chunk=100, run=2), ["aa", "aa", "a  bb"])
        self.assertEqual(bpe.kimi_cut("a     b", chunk=100, run=2), ["a  ", "  ", " b"])

    @unittest.skipUnless(os.environ.get("K3HOST") and os.environ.get("K3_MODEL"),
                         "set K3HOST (a k3host binary) and K3_MODEL (a checkpoint with this tokenizer)")
    def test_ids_equal_the_engine(self):
        """The committed held-out text, and its first 2,000 characters repeated past one Kimi
        chunk, encode to the same ids here and in `k3host tokenize`."""
        model = os.environ["K3_MODEL"]
        enc = bpe.Encoder(bpe.read_rank_file(os.path.join(model, "tiktoken.model")))
        held = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "text", "heldout.txt")
        with open(held, "rb") as f:
            text = f.read().decode("utf-8")
        for sample in (text, text[:2000] * 230):
            got = subprocess.run([os.environ["K3HOST"], "--set", f"model.path={model}", "tokenize"],
                                 input=sample.encode(), capture_output=True, check=True).stdout
            self.assertEqual([int(x) for x in got.split()], enc.encode(sample))

    def test_pretokenizer_pieces(self):
        self.assertEqual(bpe.pretokenize("Hello, world's  end\n\n 123456"),
                         ["Hello", ",", " world's", " ", " end", "\n\n", " ", "123", "456"])


if __name__ == "__main__":
    unittest.main()
