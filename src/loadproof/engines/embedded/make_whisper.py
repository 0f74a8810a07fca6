"""Makes a tiny speech-to-text model that vLLM's CPU build serves on /v1/audio/transcriptions: a Whisper of
2 + 2 layers, 128 wide, with seeded RANDOM weights. Timing and token accounting are real (Whisper's feature
extractor turns each 30 s of audio into 3,000 mel frames, the encoder into 1,500 positions, at their true
shapes); the transcripts are noise. For load tests of transcription requests, never for what is said. Run with
the embedded engine's Python, which has torch and transformers; offline, in a few seconds, byte-identical for
one seed:

    python make_whisper.py OUT_DIR SEED

- Tokenizer: byte-level BPE with no merges (the 256 byte tokens), then Whisper's special tokens in Whisper's
  order (<|endoftext|> 256, <|startoftranscript|> 257, 99 languages, <|translate|>, <|transcribe|>,
  <|startoflm|>, <|startofprev|>, <|nospeech|>, <|notimestamps|>) and the 1,501 timestamps: nothing to fetch.
- Feature extractor: Whisper's (80 mel bins, 16 kHz, 30 s chunks).
vLLM reads WAV through `soundfile`, which the engine's environment gets for a profile that serves this model.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def byte_symbols() -> list[str]:
    """GPT-2's stand-ins for the 256 bytes as a byte-level BPE's vocabulary orders them: the printable bytes
    as themselves, then the others as chr(256 + n)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    return [chr(b) for b in printable] + [chr(256 + n) for n in range(256 - len(printable))]


def main(out_dir: Path, seed: int) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch  # type: ignore[import-not-found]  # only the engine's Python has it
    from transformers import (  # type: ignore[import-not-found]  # only the engine's Python has it
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )
    from transformers.models.whisper.tokenization_whisper import (  # type: ignore[import-not-found]  # only the engine's Python has it
        LANGUAGES,
    )

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = {symbol: i for i, symbol in enumerate(byte_symbols())}
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out_dir / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    specials = [
        "<|startoftranscript|>",
        *[f"<|{code}|>" for code in LANGUAGES],
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
    ]
    tok = WhisperTokenizer(vocab=str(out_dir / "vocab.json"), merges=str(out_dir / "merges.txt"))
    tok.add_special_tokens({"additional_special_tokens": specials})
    tok.add_tokens([f"<|{i * 0.02:.2f}|>" for i in range(1501)])
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|startoftranscript|>", "<|notimestamps|>")}
    if ids["<|endoftext|>"] != 256 or ids["<|startoftranscript|>"] != 257:
        sys.exit(f"Whisper's special tokens are not where Whisper has them: {ids}")
    end = ids["<|endoftext|>"]
    config = WhisperConfig(
        vocab_size=(len(tok) + 63) // 64 * 64,
        num_mel_bins=80,
        d_model=128,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
        max_source_positions=1500,
        max_target_positions=448,
        bos_token_id=end,
        eos_token_id=end,
        pad_token_id=end,
        decoder_start_token_id=ids["<|startoftranscript|>"],
        suppress_tokens=[],
        begin_suppress_tokens=[],
        tie_word_embeddings=True,
    )
    config.architectures = ["WhisperForConditionalGeneration"]
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).to(torch.bfloat16).eval()
    generation = model.generation_config
    generation.decoder_start_token_id = ids["<|startoftranscript|>"]
    generation.eos_token_id = generation.pad_token_id = generation.bos_token_id = end
    generation.no_timestamps_token_id = ids["<|notimestamps|>"]
    generation.lang_to_id = {f"<|{c}|>": tok.convert_tokens_to_ids(f"<|{c}|>") for c in LANGUAGES}
    generation.task_to_id = {t: tok.convert_tokens_to_ids(f"<|{t}|>") for t in ("transcribe", "translate")}
    generation.is_multilingual = True
    model.save_pretrained(str(out_dir), safe_serialization=True)
    features = WhisperFeatureExtractor(feature_size=80, sampling_rate=16000, hop_length=160, chunk_length=30, n_fft=400)
    WhisperProcessor(feature_extractor=features, tokenizer=tok).save_pretrained(str(out_dir))
    params = sum(p.numel() for p in model.parameters())
    print(f"saved {out_dir}: {params / 1e6:.1f}M parameters (random), vocabulary {len(tok)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_whisper.py OUT_DIR SEED")
    main(Path(sys.argv[1]), int(sys.argv[2]))
