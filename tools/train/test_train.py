"""Self-checks of the training recipe: /usr/bin/python3 -m unittest -v test_train (in tools/train)."""

import os
import subprocess
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
from model import K3Model, TrainModel, params_from_checkpoint  # noqa: E402

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

    def test_pretokenizer_pieces(self):
        self.assertEqual(bpe.pretokenize("Hello, world's  end\n\n 123456"),
                         ["Hello", ",", " world's", " ", " end", "\n\n", " ", "123", "456"])


if __name__ == "__main__":
    unittest.main()
