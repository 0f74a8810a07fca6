"""Makes a tiny vision-language model that vLLM's CPU build serves: an Idefics3 (SmolVLM's architecture) of
68.8M parameters with seeded RANDOM weights. Timing and token accounting are real (the vision encoder, the
connector and the text model run at their true shapes; the processor counts an image's tokens as Idefics3's
does); the answers are noise. For load tests of image requests (what an image costs in prompt tokens and
time, the engine's multimodal cache), never for what a model sees. Run with the embedded engine's Python,
which has torch, transformers and PIL; offline, in about 10 s, byte-identical for one seed:

    python make_vlm.py OUT_DIR TOKENIZER_DIR SEED

- Idefics3, because neither vLLM's module (vllm/model_executor/models/idefics3.py) nor transformers' processor
  needs torchvision, which the engine's environment removes (a CUDA build that breaks vLLM's import): without
  it transformers picks the PIL image processor (Idefics3ImageProcessorPil), which vLLM's idefics3 takes.
- Vision: a SigLIP-style ViT (2 layers, 128 wide) on 256-pixel tiles of 16-pixel patches; a pixel-shuffle
  connector (scale 2); text: a Llama (2 layers, 256 wide, tied embeddings).
- Tokenizer: Gemma 3's (TOKENIZER_DIR, the embedded model's folder) with Idefics3's 40 special tokens added.
- Tokens per image: image_seq_len = (256/16)^2 / 2^2 = 64. With splitting off (vLLM's
  `--mm-processor-kwargs '{"do_image_splitting": false}'`, as the embedded-vlm profile serves it), any
  image is one global 256 x 256 image: `<fake_token_around_image><global-img>` 64 x `<image>`
  `<fake_token_around_image>`, 64 + 3 = 67 tokens whatever its size. With splitting on (this folder's own
  default, SmolVLM's) an image is resized to at most 512 on its longest edge and cut into 256-pixel tiles,
  each 64 + 2 tokens plus a newline a row, then the global image's 64 + 3 after one more newline.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

TILE = 256  # the vision encoder's image size: one tile, and the global image, are TILE x TILE
PATCH = 16
SCALE = 2  # pixel shuffle: (TILE / PATCH)^2 / SCALE^2 image tokens per tile
LONGEST = 512  # with splitting on, images are resized to at most this longest edge (<= 2 x 2 tiles)
IMAGE_SEQ_LEN = (TILE // PATCH) ** 2 // SCALE**2

SPECIAL = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"] + [
    f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)
]

# Idefics3's template (User: / Assistant: turns, each ended by <end_of_utterance>) after Gemma's <bos>; a
# message's content is a string or a list of text and image parts
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'] is string %}: {{ message['content'] }}"
    "{% else %}{% if message['content'][0]['type'] == 'image' %}:{% else %}: {% endif %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] == 'image' %}<image>{% endif %}{% endfor %}{% endif %}"
    "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)


def main(out_dir: Path, tokenizer_dir: Path, seed: int) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch  # type: ignore[import-not-found]  # only the engine's Python has it
    from transformers import (  # type: ignore[import-not-found]  # only the engine's Python has it
        AutoTokenizer,
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3Processor,
        LlamaConfig,
    )
    from transformers.models.idefics3.configuration_idefics3 import (  # type: ignore[import-not-found]  # only the engine's Python has it
        Idefics3VisionConfig,
    )
    from transformers.models.idefics3.image_processing_pil_idefics3 import (  # type: ignore[import-not-found]  # only the engine's Python has it (PIL, no torchvision)
        Idefics3ImageProcessorPil,
    )

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    tok.add_special_tokens({"additional_special_tokens": SPECIAL})
    ids = {t: tok.convert_tokens_to_ids(t) for t in SPECIAL}
    if len(set(ids.values())) != len(SPECIAL) or tok.unk_token_id in ids.values():
        sys.exit(f"the tokenizer did not take Idefics3's special tokens apart: {ids}")
    vocab = len(tok)
    vocab_padded = (vocab + 63) // 64 * 64
    eos = [tok.eos_token_id, ids["<end_of_utterance>"]]
    text = LlamaConfig(
        vocab_size=vocab_padded,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=32768,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tok.pad_token_id,
    )
    vision = Idefics3VisionConfig(
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=TILE,
        patch_size=PATCH,
    )
    config = Idefics3Config(
        text_config=text.to_dict(),
        vision_config=vision.to_dict(),
        image_token_id=ids["<image>"],
        scale_factor=SCALE,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
    )
    config.architectures = ["Idefics3ForConditionalGeneration"]

    torch.manual_seed(seed)
    model = Idefics3ForConditionalGeneration(config).to(torch.bfloat16).eval()
    model.generation_config.bos_token_id = tok.bos_token_id
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = tok.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)

    image_processor = Idefics3ImageProcessorPil(
        do_image_splitting=True, size={"longest_edge": LONGEST}, max_image_size={"longest_edge": TILE}
    )
    processor = Idefics3Processor(
        image_processor=image_processor, tokenizer=tok, image_seq_len=IMAGE_SEQ_LEN, chat_template=CHAT_TEMPLATE
    )
    processor.save_pretrained(str(out_dir))
    (out_dir / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")  # where vLLM's chat looks first
    made = {"seed": seed, "image_seq_len": IMAGE_SEQ_LEN, "special_ids": ids, "random_weights": True}
    (out_dir / "make_vlm.json").write_text(json.dumps(made, indent=1), encoding="utf-8")
    params = sum(p.numel() for p in model.parameters())
    print(f"saved {out_dir}: {params / 1e6:.1f}M parameters (random), vocabulary {vocab} (padded to {vocab_padded})")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: make_vlm.py OUT_DIR TOKENIZER_DIR SEED")
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
