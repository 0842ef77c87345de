"""Trains the demo model's BPE and writes it as K3 ships its tokenizer.

Usage: /usr/bin/python3 tools/train/tokenizer.py DATA_DIR [--ranks 3072]

Reads DATA_DIR/train.txt, writes DATA_DIR/tiktoken.model (ranks) and
DATA_DIR/tokenizer_config.json: the 256 K3 special tokens at ids ranks+0..255 with [BOS] at
ranks+0 and <|end_of_msg|> (the end-of-turn/EOS) at ranks+2, named as the release's
tokenization_kimi.py names them (the same table as core/src/synth/make_model_tokenizer.cpp).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402

NAMED = {0: "[BOS]", 1: "[EOS]", 2: "<|end_of_msg|>", 3: "<|open|>", 4: "<|close|>", 5: "<|sep|>",
         6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
         11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>", 13: "<|tool_call_begin|>",
         14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>", 17: "<|im_middle|>",
         18: "<|media_begin|>", 19: "<|media_content|>", 20: "<|media_end|>", 21: "<|media_pad|>",
         22: "<think>", 23: "</think>", 254: "[UNK]", 255: "[PAD]"}


def tokenizer_config(ranks):
    decoder = {str(ranks + s): {"content": NAMED.get(s, f"<|reserved_token_{ranks + s}|>"), "lstrip": False,
                                "normalized": False, "rstrip": False, "single_word": False, "special": True}
               for s in range(256)}
    return {"added_tokens_decoder": decoder, "additional_special_tokens": list(NAMED.values()),
            "bos_token": "[BOS]", "eos_token": "<|end_of_msg|>", "pad_token": "[PAD]", "unk_token": "[UNK]",
            "clean_up_tokenization_spaces": False, "model_max_length": 1048576,
            "tokenizer_class": "TikTokenTokenizer",
            "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--ranks", type=int, default=3072)
    args = ap.parse_args()
    with open(os.path.join(args.data, "train.txt"), "rb") as f:
        text = f.read().decode("utf-8")
    tokens = bpe.train(text, args.ranks)
    if len(tokens) != args.ranks:
        sys.exit(f"tokenizer: the text supports only {len(tokens)} ranks, asked for {args.ranks}")
    bpe.write_rank_file(tokens, os.path.join(args.data, "tiktoken.model"))
    with open(os.path.join(args.data, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(args.ranks), f, indent=1)
    print(f"{args.ranks} ranks, vocab_size {args.ranks + 256}")


if __name__ == "__main__":
    main()
