"""Clocks: the planner core reads time only through these, so the same code runs live (wall
clock) and in simulation (virtual clock, where a 900 s workload takes seconds)."""

from __future__ import annotations

import time


class VirtualClock:
    """Simulated time; `sleep` and `advance_to` move it instantly."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now = start_s

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._now += seconds

    def advance_to(self, t: float) -> None:
        if t > self._now:
            self._now = t

    def spent(self, seconds: float) -> None:
        """Real work (a real engine's step) took this long: simulated time moves with it."""
        self.sleep(seconds)


class WallClock:
    """Monotonic seconds since the clock was made; `sleep` really waits."""

    def __init__(self, origin: float | None = None) -> None:
        """`origin`: another WallClock's, to read the same times (monotonic time is one
        clock for every process of the machine)."""
        self.origin = time.monotonic() if origin is None else origin

    def now(self) -> float:
        return time.monotonic() - self.origin

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def advance_to(self, t: float) -> None:
        self.sleep(t - self.now())

    def spent(self, seconds: float) -> None:
        """Real work took this long; it has already passed on this clock."""


Clock = VirtualClock | WallClock
