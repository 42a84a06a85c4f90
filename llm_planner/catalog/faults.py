"""Robots that fail on purpose: a failure probability per skill, for simulated robots (the
fleet file's `fail_rate` option) and simulated runs (`lrtrace compare / simulate / replay
--fail-rate`).

Whether a call fails is drawn per task, call by call in plan order, from a generator seeded by
(seed, task) apart from the one that draws call times: a live simulated robot and a simulated
run with the same seed fail the same calls, and the failures leave the times unchanged."""

from __future__ import annotations

from llm_planner.catalog.exec_model import TaskGenerators
from llm_planner.domain.calls import SkillCall

ANY_SKILL = "*"


def parse_fail_rates(spec: str | float | dict | None) -> dict[str, float]:
    """`0.05` (every skill), `"mf=0.1,g=0.05"` or `{mf: 0.1, "*": 0.01}` -> skill -> probability."""
    if spec is None or spec == "":
        return {}
    if isinstance(spec, (int, float)):
        rates = {ANY_SKILL: float(spec)}
    elif isinstance(spec, dict):
        rates = {str(k): float(v) for k, v in spec.items()}
    else:
        rates = {}
        for item in str(spec).split(","):
            skill, eq, value = item.strip().rpartition("=")
            try:
                rates[skill.strip() if eq else ANY_SKILL] = float(value)
            except ValueError:
                raise ValueError(f"fail rate {item.strip()!r}: write SKILL=PROBABILITY or one probability") from None
    bad = {skill: p for skill, p in rates.items() if not 0.0 <= p <= 1.0}
    if bad:
        raise ValueError(f"fail rates must be probabilities in [0, 1]: {bad}")
    return rates


def failure_message(call: SkillCall) -> str:
    return f"simulated failure of {call.text}"


class CallFaults:
    """Draws which calls fail (see the module's doc)."""

    def __init__(self, rates: dict[str, float], seed: int, keep: int | None = None) -> None:
        """`keep`: the generators of this many recent tasks (TaskGenerators)."""
        self.rates = rates
        self._rngs = TaskGenerators(seed, "#faults", keep)

    def rate(self, skill: str) -> float:
        return self.rates.get(skill, self.rates.get(ANY_SKILL, 0.0))

    def fails(self, task_id: str, call: SkillCall) -> bool:
        """The task's next call (in plan order) fails."""
        rate = self.rate(call.skill)
        return rate > 0.0 and bool(self._rngs(task_id).random() < rate)
