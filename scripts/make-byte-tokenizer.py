#!/usr/bin/env python3
"""Writes a byte-level tokenizer (one token per UTF-8 byte) padded to a model's vocabulary size.

For dummy-weight runs: vLLM with `--load-format dummy` needs a tokenizer whose ids cover the model's
vocabulary. With this one every prompt byte is one token, so loadproof's haystack builder plans exact
lengths from the same tokenizer.json, and the random tokens the model emits detokenize to visible
`<tN>` pieces (never empty chunks). Ids 256.. are placeholders the encoder never produces.

usage: scripts/make-byte-tokenizer.py OUT_DIR --vocab-size 128256 [--eos-id 128001]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers.pre_tokenizers import ByteLevel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--vocab-size", type=int, required=True)
    parser.add_argument("--eos-id", type=int, default=None, help="id of the end-of-sequence placeholder")
    args = parser.parse_args()
    alphabet = sorted(ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    for i in range(len(vocab), args.vocab_size):
        vocab[f"<t{i}>"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    args.out.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 10**9,
        "clean_up_tokenization_spaces": False,
    }
    if args.eos_id is not None:
        config["eos_token"] = f"<t{args.eos_id}>"
    (args.out / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}/tokenizer.json: {args.vocab_size:,} ids, one token per byte")


if __name__ == "__main__":
    main()
