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


@lru_cache(maxsize=None)
def _load_cached(path: Path) -> EngineProfile:
    return EngineProfile.model_validate(yaml.safe_load(path.read_text()))


def load_engine_profile(name_or_path: str | Path) -> EngineProfile:
    return _load_cached(resolve_resource(name_or_path, "config/engine_profiles").resolve())
