"""Averaging LoRA adapters: the mean of each weight over adapters of one base model, rank and
target modules. Two adapters where one was tuned further from the other keep much of what each
does well (weight averaging of fine-tuned models, as in WiSE-FT and model soups)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ADAPTER_FILE = "adapter_model.safetensors"


def average_adapters(folders: list[Path], out_dir: Path) -> dict:
    """Write the mean adapter of `folders` to `out_dir` (weights in the first's dtype, its
    config); returns what its `training.json` says."""
    import torch
    from safetensors.torch import load_file, save_file

    if len(folders) < 2:
        raise ValueError("averaging needs two adapters or more")
    weights = []
    for folder in folders:
        if not (folder / ADAPTER_FILE).is_file():
            raise ValueError(f"{folder}: no {ADAPTER_FILE} there")
        weights.append(load_file(str(folder / ADAPTER_FILE)))
    shapes = {k: v.shape for k, v in weights[0].items()}
    for folder, w in zip(folders[1:], weights[1:]):
        if {k: v.shape for k, v in w.items()} != shapes:
            raise ValueError(
                f"{folder}: not an adapter of the same base model, rank and target modules as {folders[0]}"
            )
    mean = {
        k: (torch.stack([w[k].to(torch.float32) for w in weights]).mean(dim=0)).to(v.dtype).contiguous()
        for k, v in weights[0].items()
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(mean, str(out_dir / ADAPTER_FILE))
    shutil.copyfile(folders[0] / "adapter_config.json", out_dir / "adapter_config.json")
    inputs = [json.loads((f / "training.json").read_text()) if (f / "training.json").is_file() else {} for f in folders]
    result = {
        "base_model": inputs[0].get("base_model"),
        "skill_sets": sorted({s for i in inputs for s in i.get("skill_sets", [])}),
        "averaged": [str(f) for f in folders],
        "inputs": inputs,
    }
    (out_dir / "training.json").write_text(json.dumps(result, indent=1) + "\n")
    return result
