"""An engine that stops answering: `WatchedEngine` runs each step (and each warm-up) of the
engine it wraps on a worker thread and gives up on it after a time limit, raising EngineHung.
The planner handles that as any failed step (planning/planner.py `_restart_engine`: the tasks
inside fail with the reason, the engine restarts); restarting after a hang replaces the
engine with a new one from the factory, as a hung call cannot be interrupted in Python: its
thread and the old engine are left behind (a daemon thread; the old engine's memory is not
freed while the call hangs). The live node and the real engine's runs in `lrtrace compare` /
`replay` use it; simulations with the sim engine do not need it."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from llm_planner.domain.clock import Clock
from llm_planner.engine.base import Continuation, Engine, EngineError, EngineStats, GenerationRequest, StepResult
from llm_planner.engine.calibration import StepCorrection

log = logging.getLogger(__name__)


class EngineHung(EngineError):
    pass


class _Worker:
    """One daemon thread that runs the calls it is given, one at a time."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="llm_planner-engine", daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], Any], timeout_s: float) -> Any:
        """fn's result or exception; None and the call left running if it took longer."""
        box: dict[str, Any] = {}
        done = threading.Event()
        self._calls.put((fn, box, done))
        if not done.wait(timeout_s):
            raise TimeoutError
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def close(self, timeout_s: float) -> None:
        self._calls.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            fn, box, done = item
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 -- handed to the caller
                box["error"] = exc
            finally:
                done.set()


class WatchedEngine(Engine):
    """`inner` with a time limit on every step and warm-up; `replacement` makes a new engine
    when one has hung."""

    def __init__(self, inner: Engine, timeout_s: float, replacement: Callable[[], Engine]) -> None:
        self.inner = inner
        self.timeout_s = timeout_s
        self._replacement = replacement
        self._worker: _Worker | None = _Worker()  # None once closed
        self._hung = False

    def _timed(self, what: str, fn: Callable[[], Any]) -> Any:
        if self._worker is None:  # closed by a run that shared this engine; the next run goes on
            self._worker = _Worker()
        try:
            return self._worker.call(fn, self.timeout_s)
        except TimeoutError:
            self._hung = True
            self._worker = _Worker()  # the old thread stays in the hung call
            raise EngineHung(f"the engine's {what} did not return within {self.timeout_s:g} s") from None

    def step(self) -> StepResult:
        return self._timed("step", self.inner.step)

    def warm_up(self, requests: list[GenerationRequest]) -> None:
        self._timed("warm-up", lambda: self.inner.warm_up(requests))

    def close(self) -> None:
        """End the worker thread once its call returns (one left in a hung call stays, as a
        daemon)."""
        if self._worker is not None:
            self._worker.close(min(self.timeout_s, 5.0))
            self._worker = None

    def restart(self) -> None:
        if self._hung:
            log.error("replacing the engine that stopped answering (its thread is left behind)")
            clock = self.inner.clock
            self.inner = self._replacement()
            self.inner.reset(clock)  # the run in progress goes on, on its clock
            self._hung = False
        else:
            self.inner.restart()

    def reset(self, clock: Clock) -> None:
        self.inner.reset(clock)

    def add(self, request: GenerationRequest, urgency: float = 0.0) -> None:
        self.inner.add(request, urgency)

    def suspend(self, gen_id: str) -> None:
        self.inner.suspend(gen_id)

    def resume(self, gen_id: str, urgency: float = 0.0) -> None:
        self.inner.resume(gen_id, urgency)

    def release(self, gen_id: str) -> None:
        self.inner.release(gen_id)

    def detach(self, gen_id: str) -> Continuation:
        return self.inner.detach(gen_id)

    def attach(self, continuation: Continuation, urgency: float = 0.0) -> None:
        self.inner.attach(continuation, urgency)

    def continuation_of(self, request: GenerationRequest, text: str, tokens: int) -> Continuation:
        return self.inner.continuation_of(request, text, tokens)

    @property
    def running(self) -> list[str]:
        return self.inner.running

    def context_tokens(self, gen_id: str) -> int:
        return self.inner.context_tokens(gen_id)

    def prompt_tokens(self, request: GenerationRequest) -> int:
        return self.inner.prompt_tokens(request)

    def kv_free_tokens(self) -> int:
        return self.inner.kv_free_tokens()

    def predict_step_s(self, batch_size: int, context_tokens: int, prefill_tokens: int = 0, resumes: int = 0) -> float:
        return self.inner.predict_step_s(batch_size, context_tokens, prefill_tokens, resumes)

    def step_correction(self) -> StepCorrection:
        return self.inner.step_correction()

    # Writable, as on every engine: the wrapped engine's.
    @property
    def stats(self) -> EngineStats:
        return self.inner.stats

    @stats.setter
    def stats(self, value: EngineStats) -> None:
        self.inner.stats = value

    @property
    def needs_recorded_plan(self) -> bool:
        return self.inner.needs_recorded_plan

    @needs_recorded_plan.setter
    def needs_recorded_plan(self, value: bool) -> None:
        self.inner.needs_recorded_plan = value

    @property
    def tuned_skill_sets(self) -> frozenset[str]:
        return self.inner.tuned_skill_sets

    @tuned_skill_sets.setter
    def tuned_skill_sets(self, value: frozenset[str]) -> None:
        self.inner.tuned_skill_sets = value

    def __getattr__(self, name: str) -> Any:
        # What the wrapped engine has beyond the interface (its clock, vLLM's cache figures).
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
