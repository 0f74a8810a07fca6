"""Benchmark: haystack construction speed against the tokenizer's raw encode speed.

    scripts/in-venv python benchmarks/haystack_build.py [--sessions 24] [--tokens 1000000] [--tokenizer PATH]

Builds SESSIONS prompts of exactly TOKENS tokens with the embedded model's tokenizer (prepared by
`loadproof demo` or `loadproof serve --embedded`), then encodes one of the built prompts from scratch,
as a builder that re-tokenized its text would have to, and prints both rates and their ratio.
It prints what it measured; it asserts nothing.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

from tokenizers import Tokenizer

from loadproof.engines.embedded import paths
from loadproof.workloads.haystack import HaystackBuilder


def measure(sessions: int, tokens: int, tokenizer_path: Path) -> dict[str, float]:
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    t0 = time.perf_counter()
    builder = HaystackBuilder(tokenizer, overhead_tokens=1, seed=731)
    setup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    prompts = [builder.build(f"s{i:03d}", tokens, num_probes=2) for i in range(sessions)]
    build_s = time.perf_counter() - t0
    total = sessions * tokens

    t0 = time.perf_counter()
    encoded = len(tokenizer.encode(prompts[0].text).ids)
    encode_s = time.perf_counter() - t0
    assert encoded == tokens, (encoded, tokens)  # the built prompt is exactly as long as planned

    build_rate = total / build_s
    encode_rate = encoded / encode_s
    print(f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}")
    print(f"tokenizer: {tokenizer_path}")
    print(f"builder set-up (pool of {len(builder._pool)} sentences tokenized once): {setup_s:.2f} s")
    print(f"built {sessions} x {tokens:,} tokens in {build_s:.2f} s: {build_rate:,.0f} tokens/s")
    print(
        f"raw encode of one built prompt ({encoded:,} tokens, {len(prompts[0].text) / 1e6:.1f} MB): "
        f"{encode_s:.2f} s: {encode_rate:,.0f} tokens/s"
    )
    print(
        f"ratio build / raw encode: {build_rate / encode_rate:,.0f}x "
        f"(re-tokenizing all {total:,} tokens would take about {total / encode_rate:.0f} s)",
        flush=True,
    )
    return {
        "sessions": sessions,
        "tokens": tokens,
        "pool": len(builder._pool),
        "setup_s": setup_s,
        "build_s": build_s,
        "build_rate": build_rate,
        "encode_s": encode_s,
        "encode_rate": encode_rate,
        "encoded": encoded,
        "prompt_mb": len(prompts[0].text) / 1e6,
        "retokenize_s": total / encode_rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--tokenizer", type=Path, default=paths().model_dir / "tokenizer.json")
    args = parser.parse_args()
    if not args.tokenizer.is_file():
        raise SystemExit(
            f"no tokenizer at {args.tokenizer}: run `loadproof serve --embedded` once, or pass --tokenizer"
        )
    measure(args.sessions, args.tokens, args.tokenizer)


if __name__ == "__main__":
    main()
