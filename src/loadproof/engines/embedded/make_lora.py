"""Makes a LoRA adapter for a model folder, in the PEFT layout vLLM loads (`adapter_config.json` and
`adapter_model.safetensors`), with seeded random weights of the right shapes: for load tests of adapter
serving (which adapter a request asks for, what a cold one costs), not for its answers. Run with the
embedded engine's Python, which has torch and safetensors:

    python make_lora.py MODEL_DIR OUT_DIR RANK SEED

The adapter targets every layer's q_proj and v_proj (A: rank x hidden_size; B: out x rank, out being
num_attention_heads x head_dim for q and num_key_value_heads x head_dim for v), lora_alpha = 2 x rank, B
scaled small so the base model's answers change little.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(model_dir: Path, out_dir: Path, rank: int, seed: int) -> None:
    import torch  # type: ignore[import-not-found]  # only the engine's Python has it
    from safetensors.torch import save_file  # type: ignore[import-not-found]  # only the engine's Python has it

    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    config = config.get("text_config", config)
    hidden, layers = config["hidden_size"], config["num_hidden_layers"]
    head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
    outs = {
        "q_proj": config["num_attention_heads"] * head_dim,
        "v_proj": config.get("num_key_value_heads", config["num_attention_heads"]) * head_dim,
    }
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(layers):
        for proj, out in outs.items():
            key = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
            tensors[f"{key}.lora_A.weight"] = torch.randn(rank, hidden, generator=gen) / hidden**0.5
            tensors[f"{key}.lora_B.weight"] = torch.randn(out, rank, generator=gen) * 1e-3
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()}, str(out_dir / "adapter_model.safetensors")
    )
    (out_dir / "adapter_config.json").write_text(
        json.dumps(
            {
                "peft_type": "LORA",
                "task_type": "CAUSAL_LM",
                "r": rank,
                "lora_alpha": 2 * rank,
                "lora_dropout": 0.0,
                "target_modules": sorted(outs),
                "bias": "none",
                "base_model_name_or_path": str(model_dir),
                "fan_in_fan_out": False,
                "inference_mode": True,
            },
            indent=2,
        ),
        encoding="utf-8",
    )


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: make_lora.py MODEL_DIR OUT_DIR RANK SEED")
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
