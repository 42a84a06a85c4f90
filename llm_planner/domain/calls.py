"""A skill call found in a plan: what the segmenter emits, the robot executes and the
execution-time models price."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class SkillCall:
    skill: str  # the skill's abbreviation (its key in exec models)
    text: str  # the call as written, e.g. "mf(50)"
    start: int  # offsets into the statement text it was found in
    end: int

    @property
    def number(self) -> float | None:
        """First numeric argument (distance, degrees, seconds), if any."""
        open_paren = self.text.find("(")
        if open_paren < 0:
            return None
        match = _NUMBER.search(self.text, open_paren)
        return float(match.group()) if match else None
