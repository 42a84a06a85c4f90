"""The pace of a live replay on this machine's engine: a workload written for a faster
engine has its arrivals spread by how much slower this machine generates its plans, so a
slower CPU sees the same contention instead of a backlog it can never clear."""

from __future__ import annotations

from dataclasses import dataclass

from llm_planner.engine.profile import EngineProfile
from llm_planner.planning.estimates import TYPICAL_PROMPT_TOKENS
from llm_planner.settings.config import PlannerConfig


@dataclass(frozen=True)
class Pace:
    here_s: float  # this machine's engine seconds for the workload's plans (by its profile)
    reference_s: float | None  # the same on the engine the workload was written for
    slowdown: float  # arrivals this many times further apart (>= 1)

    def grace_s(self) -> float:
        """Waiting for the last tasks: a minute plus three times this machine's engine time."""
        return 60.0 + 3.0 * self.here_s


def pace_for(here: EngineProfile, reference: EngineProfile | None, plans: int, config: PlannerConfig) -> Pace:
    tokens, batch = config.vllm.max_plan_tokens, config.batch.max_batch_size
    here_s = here.generation_s(plans, tokens, TYPICAL_PROMPT_TOKENS, batch)
    if reference is None:
        return Pace(here_s, None, 1.0)
    reference_s = reference.generation_s(plans, tokens, TYPICAL_PROMPT_TOKENS, batch)
    return Pace(here_s, reference_s, max(1.0, here_s / reference_s) if reference_s > 0 else 1.0)
