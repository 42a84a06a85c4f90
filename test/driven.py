"""A planner on the sim engine with simulated robots, driven by hand: the tests' shared planner."""

from llm_planner.dispatch.robot_port import CallTimeSource, SimRobots
from llm_planner.domain.clock import VirtualClock
from llm_planner.domain.tasks import TaskState
from llm_planner.engine import SimEngine, load_engine_profile
from llm_planner.lrtrace.simulate import EventQueue
from llm_planner.planning.planner import Planner
from llm_planner.sched.queues import get_policy


class Driven:
    """A planner on the sim engine with simulated robots, stepped by hand."""

    def __init__(self, config, tokenizer, policy="timely", max_batch=1, engine_class=SimEngine, **planner_options):
        """`engine_class`: a SimEngine, or a class made from it (one that fails on purpose)."""
        config = config.model_copy(update={"batch": config.batch.model_copy(update={"max_batch_size": max_batch})})
        self.clock, self.events, self.statuses = VirtualClock(), EventQueue(), []
        engine = engine_class(load_engine_profile(config.engine_profile), tokenizer, self.clock)
        self.planner = Planner(config, get_policy(policy), engine, self.clock,
                               lambda listener: SimRobots(self.events.push, self.clock.now, CallTimeSource(0), listener),
                               self.statuses.append, **planner_options)

    def run(self) -> None:
        while True:
            while self.events and self.events.next_time() <= self.clock.now():
                self.events.pop()()
            if not self.planner.step():
                if not self.events:
                    return
                self.clock.advance_to(self.events.next_time())

    def first(self, state: TaskState) -> list[str]:
        """Task ids in the order they first reached `state`."""
        return list(dict.fromkeys(s.task_id for s in self.statuses if s.state == state))

    def run_until(self, t_s: float) -> None:
        """Step the planner and deliver the robots' reports until the clock reaches `t_s`."""
        while self.clock.now() < t_s:
            while self.events and self.events.next_time() <= self.clock.now():
                self.events.pop()()
            if not self.planner.step(t_s):
                self.clock.advance_to(min(t_s, self.events.next_time()) if self.events else t_s)

    def sent(self, task_id: str) -> list[str]:
        """The segments dispatched to the task's robot."""
        return [s.segment_text for s in self.statuses if s.task_id == task_id and s.state == TaskState.EXECUTING]
