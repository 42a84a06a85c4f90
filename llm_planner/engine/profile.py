"""Engine timing profiles (config/engine_profiles/*.yaml): the cost of one continuous-batching
iteration, used by the `sim` engine to advance time and by the batch controller to predict."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from llm_planner.settings.model_file import load_model_file
from llm_planner.settings.paths import cache_dir, data_path, resolve_resource

# `vllm.engine_profile: auto`: the profile of this model, dtype and machine (ProfileKey).
AUTO = "auto"
log = logging.getLogger(__name__)


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


@cache
def _load_cached(path: Path) -> EngineProfile:
    return load_model_file(EngineProfile, path, "engine profile")


def load_engine_profile(name_or_path: str | Path) -> EngineProfile:
    return _load_cached(resolve_resource(name_or_path, "config/engine_profiles").resolve())


@dataclass(frozen=True)
class ProfileKey:
    """What an engine's timing depends on: the model, the dtype, and the CPU class (None: a GPU).
    Its name, `<model>-<dtype>-cpu-<class>` or `<model>-<dtype>-gpu`, is the profile's file name."""

    model: str
    dtype: str
    cpu_class: str | None

    @property
    def name(self) -> str:
        return f"{self.model}-{self.dtype}-" + (f"cpu-{self.cpu_class}" if self.cpu_class else "gpu")

    @classmethod
    def parse(cls, name: str) -> ProfileKey | None:
        """The key a profile file's name stands for; None for a name not made by `name`."""
        match = _KEY_PATTERN.match(name)
        if match is None:
            return None
        return cls(match["model"], match["dtype"], match["cpu_class"])


_KEY_PATTERN = re.compile(
    r"^(?P<model>.+)-(?P<dtype>float32|bfloat16|float16|half|auto)-"
    r"(?:cpu-(?P<cpu_class>avx512-bf16|avx512|avx2)|gpu)$"
)

# Where a CPU class has no profile of its own, the classes whose profiles come closest, nearest
# first: float32 runs the same AVX-512 kernels with or without native bf16; AVX2 is the slowest.
_NEAREST_CLASSES = {
    "avx512": ("avx512", "avx512-bf16", "avx2"),
    "avx512-bf16": ("avx512-bf16", "avx512", "avx2"),
    "avx2": ("avx2", "avx512", "avx512-bf16"),
}
# A GPU with no profile measured for its model and dtype is predicted as the reference GPU.
GPU_STAND_IN = "llama3-8b-fp16-rtx4090"


@dataclass(frozen=True)
class ProfileChoice:
    """The profile an engine's predictions use, and where it comes from."""

    key: ProfileKey  # what the engine needs
    path: Path
    source: str  # "measured on this machine", "committed for its CPU class", "named in the config", "stand-in"

    @property
    def is_stand_in(self) -> bool:
        return self.source == STAND_IN

    @property
    def profile(self) -> EngineProfile:
        return load_engine_profile(self.path)

    def describe(self) -> str:
        if self.is_stand_in:
            return (
                f"{self.path.stem} as a stand-in: no profile for {self.key.name} was measured on this machine "
                f"or committed for its CPU class; predictions may be far off until "
                f"`llm-planner profile-engine --save{_dtype_option(self.key)}` measures one (a few minutes)"
            )
        return f"{self.path} ({self.source})"


STAND_IN = "stand-in"


def _dtype_option(key: ProfileKey) -> str:
    return f" --dtype {key.dtype}" if key.dtype != "auto" else ""


def measured_profiles_dir() -> Path:
    """Profiles `llm-planner profile-engine --save` measured on this machine."""
    return cache_dir() / "engine_profiles"


def committed_profiles_dir() -> Path:
    return data_path("config", "engine_profiles")


def find_machine_profile(key: ProfileKey) -> ProfileChoice | None:
    """This machine's own measurement first, else the profile committed for its CPU class."""
    for folder, source in (
        (measured_profiles_dir(), "measured on this machine"),
        (committed_profiles_dir(), "committed for its CPU class"),
    ):
        candidate = folder / f"{key.name}.yaml"
        if candidate.is_file():
            return ProfileChoice(key, candidate, source)
    return None


def stand_in_profile(key: ProfileKey) -> ProfileChoice:
    """The nearest profile there is for a key that has none: the same model first, then the
    same kind of device, the nearest CPU class, the same dtype; for a GPU, the reference GPU."""
    if key.cpu_class is None:
        return ProfileChoice(key, committed_profiles_dir() / f"{GPU_STAND_IN}.yaml", STAND_IN)
    classes = _NEAREST_CLASSES.get(key.cpu_class, _NEAREST_CLASSES["avx2"])
    ranked = []
    for folder in (measured_profiles_dir(), committed_profiles_dir()):
        for path in sorted(folder.glob("*.yaml")):
            other = ProfileKey.parse(path.stem)
            if other is None or other.cpu_class is None:
                continue
            ranked.append(((other.model != key.model, classes.index(other.cpu_class), other.dtype != key.dtype), path))
    if not ranked:
        raise FileNotFoundError(
            f"no CPU engine profile at all in {committed_profiles_dir()} or "
            f"{measured_profiles_dir()}: the package's data is incomplete"
        )
    return ProfileChoice(key, min(ranked, key=lambda entry: entry[0])[1], STAND_IN)


def choose_engine_profile(name: str, key: ProfileKey) -> ProfileChoice:
    """A named profile (or file) as it is; `auto` becomes this machine's profile for `key`, or
    the nearest stand-in, with a warning, where none was measured or committed: a missing
    profile file makes predictions worse, never the engine unusable."""
    if name != AUTO:
        return ProfileChoice(key, resolve_resource(name, "config/engine_profiles"), "named in the config")
    choice = find_machine_profile(key)
    if choice is None:
        choice = stand_in_profile(key)
        log.warning("engine profile: %s", choice.describe())
    return choice
