"""Drive a Planner on the wall clock in its own thread.

Everything that touches the planner runs in that thread: front ends (ROS callbacks) `post`
closures into its inbox, which is drained between engine iterations, so ROS callbacks never
block on generation and the planner needs no locks."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from llm_planner.planning.planner import Planner

log = logging.getLogger(__name__)


class LiveDriver:
    """The planner's thread. The planner handles engine faults itself (an `EngineError`
    restarts the engine); any other exception is a bug: the thread stops, logs it with its
    traceback, keeps it as `failure` and hands it to `on_failure`, rather than plan on from
    a state nobody knows."""

    def __init__(
        self,
        planner: Planner,
        idle_wait_s: float = 0.05,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.planner = planner
        self.idle_wait_s = idle_wait_s
        self.on_failure = on_failure
        self.failure: BaseException | None = None
        self._inbox: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def post(self, fn: Callable[[], None]) -> None:
        self._inbox.put(fn)

    def call(self, fn: Callable[[], object], timeout: float = 10.0):
        """Run `fn` in the planner thread and return its result (for queries and tests)."""
        done = threading.Event()
        box: dict = {}

        def wrapper() -> None:
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 -- handed back to the caller
                box["error"] = exc
            finally:
                done.set()

        if self.failure is not None:
            raise RuntimeError(f"the planner stopped after an error: {self.failure!r}")
        self.post(wrapper)
        if not done.wait(timeout):
            raise TimeoutError("planner thread did not answer")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="llm_planner-core", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.post(lambda: None)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # noqa: BLE001 -- a bug: kept, logged and handed on, not swallowed
            self.failure = exc
            log.critical("the planner failed and stops", exc_info=exc)
            if self.on_failure is not None:
                self.on_failure(exc)

    def _loop(self) -> None:
        while not self._stop.is_set():
            while True:
                try:
                    fn = self._inbox.get_nowait()
                except queue.Empty:
                    break
                fn()
            if not self.planner.step():
                try:
                    fn = self._inbox.get(timeout=self.idle_wait_s)
                except queue.Empty:
                    continue
                fn()  # outside the try: whatever it raises is a bug, not an empty inbox
