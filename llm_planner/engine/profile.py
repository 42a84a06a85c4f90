"""Engine timing profiles (config/engine_profiles/*.yaml): the cost of one continuous-batching
iteration, used by the `sim` engine to advance time and by the batch controller to predict."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from llm_planner.settings.paths import cache_dir, data_path, resolve_resource

# `vllm.engine_profile: auto`: the profile of this model, dtype and machine (machine_profile_key).
AUTO = "auto"


class EngineProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    model: str
    hardware: str
    assumptions: str
    prefill_s_per_token: float = Field(ge=0)
    decode_base_s: float = Field(gt=0)  # one decode iteration at batch 1, short context
    decode_s_per_seq: float = Field(ge=0)  # added per further sequence in the batch
    decode_s_per_context_token: float = Field(ge=0)  # KV read cost, summed over the batch
    resume_s: float = Field(ge=0)  # restoring a suspended generation's context
    kv_capacity_tokens: int = Field(gt=0)
    max_batched_tokens: int = Field(gt=0)  # chunked-prefill token budget per iteration
    prefix_caching: bool = True  # a skill set's shared system prompt is prefilled once
    # KV block size of the engine's prefix cache. Only full blocks are cached, so a resumed
    # generation recomputes its last partial block (context mod block size tokens, charged at
    # the prefill rate). 0: not modelled separately (resume_s includes it).
    kv_block_size: int = Field(default=0, ge=0)

    def resume_prefill_tokens(self, context_tokens: int) -> int:
        return context_tokens % self.kv_block_size if self.kv_block_size else 0

    def step_s(self, batch_size: int, context_tokens: int, prefill_tokens: int = 0, resumes: int = 0) -> float:
        if batch_size <= 0 and prefill_tokens <= 0:
            return 0.0
        return (
            self.decode_base_s
            + self.decode_s_per_seq * max(0, batch_size - 1)
            + self.decode_s_per_context_token * context_tokens
            + self.prefill_s_per_token * prefill_tokens
            + self.resume_s * resumes
        )

    def predict_step_s(self, batch_size: int, context_tokens: int, prefill_tokens: int = 0, resumes: int = 0) -> float:
        """step_s with each resume's partial-block recompute at its expected size (half a block)."""
        return self.step_s(batch_size, context_tokens, prefill_tokens + resumes * self.kv_block_size // 2, resumes)

    def generation_s(self, plans: int, plan_tokens: int, prompt_tokens: int, max_batch: int) -> float:
        """Engine seconds to generate `plans` plans of `plan_tokens` tokens, each after
        `prompt_tokens` uncached prompt tokens, in batches of up to `max_batch`: how long this
        machine needs for a workload's plans (sizes the live demo's pace and grace time)."""
        if plans <= 0:
            return 0.0
        batch = max(1, min(plans, max_batch))
        waves = -(-plans // batch)
        context = batch * (prompt_tokens + plan_tokens // 2)
        return plans * prompt_tokens * self.prefill_s_per_token + waves * plan_tokens * self.step_s(batch, context)


@lru_cache(maxsize=None)
def _load_cached(path: Path) -> EngineProfile:
    return EngineProfile.model_validate(yaml.safe_load(path.read_text()))


def load_engine_profile(name_or_path: str | Path) -> EngineProfile:
    return _load_cached(resolve_resource(name_or_path, "config/engine_profiles").resolve())


def machine_profile_key(model_name: str, dtype: str, cpu_class: str | None) -> str:
    """Profiles are kept per model, dtype and CPU class (a GPU profile is only ever measured)."""
    return f"{model_name}-{dtype}-" + (f"cpu-{cpu_class}" if cpu_class else "gpu")


def measured_profiles_dir() -> Path:
    """Profiles `llm-planner profile-engine --save` measured on this machine."""
    return cache_dir() / "engine_profiles"


def find_machine_profile(key: str) -> Path | None:
    """This machine's own measurement first, else the profile committed for its CPU class."""
    for candidate in (measured_profiles_dir() / f"{key}.yaml", data_path("config", "engine_profiles", f"{key}.yaml")):
        if candidate.is_file():
            return candidate
    return None


def resolve_engine_profile_path(name: str, key: str) -> Path:
    """A named profile (or file) as it is; `auto` becomes this machine's profile for `key`."""
    if name != AUTO:
        return resolve_resource(name, "config/engine_profiles")
    path = find_machine_profile(key)
    if path is None:
        raise FileNotFoundError(
            f"no engine profile for {key} (none measured on this machine, none committed for its CPU class); "
            f"measure one with `llm-planner profile-engine --save` (a few minutes)")
    return path
