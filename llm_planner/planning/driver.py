"""Drive a Planner on the wall clock in its own thread.

Everything that touches the planner runs in that thread: front ends (ROS callbacks) `post`
closures into its inbox, which is drained between engine iterations, so ROS callbacks never
block on generation and the planner needs no locks."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

from llm_planner.planning.planner import Planner

log = logging.getLogger(__name__)


class LiveDriver:
    def __init__(self, planner: Planner, idle_wait_s: float = 0.05) -> None:
        self.planner = planner
        self.idle_wait_s = idle_wait_s
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
            except BaseException as exc:  # handed back to the caller
                box["error"] = exc
            finally:
                done.set()

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

    def _run_one(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # one bad event must not stop the planner
            log.exception("planner event failed")

    def _run(self) -> None:
        while not self._stop.is_set():
            while True:
                try:
                    fn = self._inbox.get_nowait()
                except queue.Empty:
                    break
                self._run_one(fn)
            try:
                busy = self.planner.step()
            except Exception:  # the planner itself handles engine faults; this is a planner bug
                log.exception("planner step failed")
                busy = False
            if not busy:
                try:
                    self._run_one(self._inbox.get(timeout=self.idle_wait_s))
                except queue.Empty:
                    pass
