"""Failures fail fast: an engine's `EngineError` is a fault the planner mends by restarting the
engine; any other exception is a bug, which ends a simulation, and stops the live planner's
thread, with its traceback."""

import threading
import traceback

import pytest
from driven import Driven, backlog_workload, request, run_planner

from llm_planner.domain.clock import VirtualClock
from llm_planner.domain.tasks import TaskState
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


@pytest.fixture(scope="module")
def traces():
    return preset_traces(load_preset("wid1"))


def test_a_bug_in_the_sim_engine_ends_a_simulation_with_its_traceback(config, tokenizer, traces):
    workload = compose_preset(load_preset("wid1"), 0, traces, mean_exec_times(traces, config.robot_types))
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


def test_an_engine_fault_loses_no_generation_and_the_planner_goes_on(config, tokenizer):
    """An exception inside an engine step loses the generations inside the engine: the
    engine is restarted, each goes on from the plan the planner received (the same plan as
    without the fault), and later tasks are planned."""
    from llm_planner.engine import SimEngine

    class FailsOnce(SimEngine):
        restarts = 0

        def step(self):
            if self.stats.steps == 4 and not FailsOnce.restarts:
                raise EngineError("device lost (injected)")
            return super().step()

        def restart(self):
            FailsOnce.restarts += 1
            super().restart()

    planner, statuses = run_planner(config, tokenizer, [request("a"), request("b")], engine_class=FailsOnce,
                                    then=[request("c")])
    assert FailsOnce.restarts == 1
    for task_id in ("a", "b"):
        record = planner.records[task_id]
        assert record.state == TaskState.SUCCEEDED and record.plan == "mf(50);tp();"
        lost = [s for s in statuses if s.task_id == task_id and s.state == TaskState.SUSPENDED]
        assert len(lost) == 1
        assert lost[0].message.startswith("engine step failed (EngineError: device lost (injected)); the engine "
                                          "was restarted; the plan goes on from its ")
        assert not lost[0].message.endswith("its 0 tokens")  # it had begun: it went on, not over
    assert planner.records["c"].state == TaskState.SUCCEEDED
    assert [s.state for s in statuses if s.task_id == "c"][-1] == TaskState.SUCCEEDED
    assert not planner.engine.running and planner.active_tasks == 0


def test_a_generation_lost_with_its_engine_twice_fails_with_the_reason(config, tokenizer):
    """A fault that comes back after the restart (one that may follow the generation) does not
    loop: a generation lost a second time fails, and the planner goes on."""
    from llm_planner.engine import SimEngine

    class FailsTwice(SimEngine):
        restarts = 0
        failing_steps = (4, 2)  # in the engine's first life and, with "a" inside again, in its second

        def step(self):
            lives = FailsTwice.failing_steps
            if FailsTwice.restarts < len(lives) and self.stats.steps == lives[FailsTwice.restarts]:
                raise EngineError("device lost (injected)")
            return super().step()

        def restart(self):
            FailsTwice.restarts += 1
            super().restart()

    planner, statuses = run_planner(config, tokenizer, [request("a")], engine_class=FailsTwice, then=[request("c")])
    assert FailsTwice.restarts == 2
    record = planner.records["a"]
    assert record.state == TaskState.FAILED
    assert record.message == ("engine step failed (EngineError: device lost (injected)); the engine was restarted, "
                              "a second time")
    assert planner.records["c"].state == TaskState.SUCCEEDED
    assert planner.active_tasks == 0


def test_an_engine_that_stops_answering_is_replaced_and_the_planner_goes_on(config, tokenizer):
    """An engine step that never returns is given up after the time limit, with the reason;
    a new engine goes on with the generations that were inside and plans the later tasks."""
    import threading

    from llm_planner.engine import SimEngine

    never = threading.Event()

    class HangsOnce(SimEngine):
        def step(self):
            if self.stats.steps == 2:
                never.wait()  # a call that does not come back
            return super().step()

    try:
        planner, statuses = run_planner(config, tokenizer, [request("a"), request("b")], engine_class=HangsOnce,
                                        then=[request("c")], watch_s=0.5)
    finally:
        never.set()  # let the abandoned thread go
    for task_id in ("a", "b"):
        assert planner.records[task_id].state == TaskState.SUCCEEDED  # they went on in the replacement
        assert any("(EngineHung: the engine's step did not return within 0.5 s); the engine was restarted; the plan "
                   "goes on" in s.message for s in statuses if s.task_id == task_id and s.state == TaskState.SUSPENDED)
    assert type(planner.engine.inner) is SimEngine  # the replacement
    assert planner.records["c"].state == TaskState.SUCCEEDED
    assert [s.state for s in statuses if s.task_id == "c"][-1] == TaskState.SUCCEEDED
    assert not planner.engine.running and planner.active_tasks == 0


def test_a_shared_engine_that_stops_answering_is_replaced_for_the_runs_after_it(config, tokenizer, traces):
    """`lrtrace compare`/`replay` reuse one watched engine across runs: after a hung step the
    replacement goes on with the generations inside, on the run's clock, and
    serves the next run (also after a run closed the watchdog's thread) exactly as a new
    engine would."""
    import threading

    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine import SimEngine, load_engine_profile
    from llm_planner.engine.watchdog import WatchedEngine

    never = threading.Event()

    class HangsOnce(SimEngine):
        def step(self):
            if self.stats.steps == 3:
                never.wait()  # a call that does not come back
            return super().step()

    profile = load_engine_profile(config.engine_profile)
    engine = WatchedEngine(HangsOnce(profile, tokenizer, VirtualClock()), 0.5,
                           lambda: SimEngine(profile, tokenizer, VirtualClock()))
    workload = backlog_workload(n_normal=6)
    clocks = []  # each run's clock, as the run hands it to the engine
    reset = engine.reset
    engine.reset = lambda clock: (clocks.append(clock), reset(clock))
    try:
        first = simulate(workload, traces, "timely", config, 0, tokenizer, engine=engine)
        assert engine.inner.clock is clocks[0]  # the replacement went on with the first run
        engine.close()  # as a live run's planner node does when it is destroyed
        second = simulate(workload, traces, "timely", config, 0, tokenizer, engine=engine)
    finally:
        never.set()  # let the abandoned thread go
    assert len(first.records) == len(workload.jobs)
    assert {r.state for r in first.records} == {TaskState.SUCCEEDED}  # those inside went on in the replacement
    assert type(engine.inner) is SimEngine
    fresh = simulate(workload, traces, "timely", config, 0, tokenizer,
                     engine=SimEngine(profile, tokenizer, VirtualClock()))
    assert [(r.request.task_id, r.state, r.response_time_s, r.utility) for r in second.records] == \
        [(r.request.task_id, r.state, r.response_time_s, r.utility) for r in fresh.records]


def test_an_event_that_raises_queue_empty_is_not_taken_for_an_empty_inbox(config, tokenizer):
    """The idle planner thread waits on its inbox; what an event it takes from there raises is
    a bug like any other, even the exception an empty inbox raises."""
    import queue
    import time

    driven = Driven(config, tokenizer)
    stopped = threading.Event()
    driver = LiveDriver(driven.planner, idle_wait_s=5.0, on_failure=lambda exc: stopped.set())
    driver.start()
    time.sleep(0.2)  # idle: waiting on the inbox

    def raises() -> None:
        raise queue.Empty("a bug (injected)")

    driver.post(raises)
    assert stopped.wait(3), "the planner's thread swallowed the event's exception"
    assert isinstance(driver.failure, queue.Empty)
    driver.stop()

