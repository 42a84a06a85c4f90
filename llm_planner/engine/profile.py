"""Engine timing profiles (config/engine_profiles/*.yaml): the cost of one continuous-batching
iteration, used by the `sim` engine to advance time and by the batch controller to predict."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from ..paths import resolve_resource


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


@lru_cache(maxsize=None)
def _load_cached(path: Path) -> EngineProfile:
    return EngineProfile.model_validate(yaml.safe_load(path.read_text()))


def load_engine_profile(name_or_path: str | Path) -> EngineProfile:
    return _load_cached(resolve_resource(name_or_path, "config/engine_profiles").resolve())
