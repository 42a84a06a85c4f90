"""Failures fail fast: an engine's `EngineError` is a fault the planner mends by restarting the
engine; any other exception is a bug, which ends a simulation, and stops the live planner's
thread, with its traceback."""

import threading
import traceback

import pytest

from driven import Driven
from llm_planner.domain.tasks import TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.domain.clock import VirtualClock
from llm_planner.engine import SimEngine, load_engine_profile
from llm_planner.engine.base import EngineError
from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces
from llm_planner.lrtrace.simulate import simulate
from llm_planner.planning.driver import LiveDriver


def failing_engine(error: Exception, at_step: int = 2):
    """A sim engine whose iteration `at_step` raises `error`, once."""

    class Failing(SimEngine):
        raised = 0

        def step(self):
            if self.stats.steps == at_step and not Failing.raised:
                Failing.raised += 1
                raise error
            return super().step()

    return Failing


def request(task_id: str) -> TaskRequest:
    return TaskRequest(task_id, "drone1", "tello", "Scene: [door]. Fly forward.", "normal", Tuf(1, 1, 1.5), 0.0,
                       "mf(50);tp();")


def test_a_bug_in_the_sim_engine_ends_a_simulation_with_its_traceback(config, tokenizer):
    preset = load_preset("wid1")
    traces = preset_traces(preset)
    workload = compose_preset(preset, 0, traces, mean_exec_times(traces, config.robot_types))
    bug = TypeError("unsupported operand (injected)")
    engine = failing_engine(bug, at_step=3)(load_engine_profile(config.engine_profile), tokenizer, VirtualClock())
    with pytest.raises(TypeError, match="injected") as raised:
        simulate(workload, traces, "timely", config, 0, tokenizer, engine=engine)
    assert raised.value is bug
    assert "in step" in "".join(traceback.format_tb(raised.tb))  # the engine's own frame, not a log line


def test_an_engine_error_restarts_the_engine_and_the_task_goes_on(config, tokenizer):
    driven = Driven(config, tokenizer, engine_class=failing_engine(EngineError("device lost (injected)")))
    driven.planner.submit(request("a"))
    driven.run()
    assert driven.planner.records["a"].state == TaskState.SUCCEEDED
    assert any("device lost (injected)" in s.message and "was restarted" in s.message for s in driven.statuses)


def test_a_bug_in_an_engine_step_is_not_taken_for_an_engine_fault(config, tokenizer):
    driven = Driven(config, tokenizer, engine_class=failing_engine(ZeroDivisionError("a bug (injected)")))
    driven.planner.submit(request("a"))
    with pytest.raises(ZeroDivisionError, match="a bug"):
        driven.run()
    assert not any("was restarted" in s.message for s in driven.statuses)


def test_the_live_planner_thread_stops_on_a_bug_and_hands_it_on(config, tokenizer):
    """The live node keeps restarting engines on EngineError; a bug stops the planner's thread,
    which keeps the exception and hands it to the node (which ends its tasks and stops)."""
    driven = Driven(config, tokenizer, engine_class=failing_engine(ZeroDivisionError("a bug (injected)")))
    handed: list[BaseException] = []
    stopped = threading.Event()
    driver = LiveDriver(driven.planner, on_failure=lambda exc: (handed.append(exc), stopped.set()))
    driver.start()
    driver.post(lambda: driven.planner.submit(request("a")))
    assert stopped.wait(10), "the planner's thread did not stop on the bug"
    assert isinstance(driver.failure, ZeroDivisionError) and handed == [driver.failure]
    with pytest.raises(RuntimeError, match="the planner stopped after an error: ZeroDivisionError"):
        driver.call(lambda: None)
    driver.stop()


def test_the_live_planner_thread_goes_on_after_an_engine_error(config, tokenizer):
    driven = Driven(config, tokenizer, engine_class=failing_engine(EngineError("device lost (injected)")))
    driver = LiveDriver(driven.planner, on_failure=lambda exc: pytest.fail(f"stopped on {exc!r}"))
    driver.start()
    try:
        driver.post(lambda: driven.planner.submit(request("a")))
        restarted = threading.Event()
        driven.planner.on_status = lambda s: restarted.set() if "was restarted" in s.message else None
        assert restarted.wait(10)
        assert driver.failure is None and driver.call(lambda: "alive") == "alive"
    finally:
        driver.stop()
