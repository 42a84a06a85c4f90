"""The tests' one shared planner: sim engines and simulated robots on a virtual clock, stepped
by hand as `lrtrace simulate` steps it, with the statuses kept."""

import math

from llm_planner.dispatch.robot_port import CallTimeSource, SimRobots
from llm_planner.domain.clock import VirtualClock
from llm_planner.domain.tasks import TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.engine import SimEngine, load_engine_profile
from llm_planner.engine.watchdog import WatchedEngine
from llm_planner.lrtrace.formats import Job, Workload
from llm_planner.lrtrace.simulate import EventQueue
from llm_planner.planning.planner import Planner
from llm_planner.planning.replicas import ReplicaSet
from llm_planner.sched.policies import get_policy


class Driven:
    """A planner on the sim engine (or `replicas` of it) with simulated robots, stepped by hand."""

    def __init__(self, config, tokenizer, policy="timely", max_batch=None, engine_class=SimEngine, *, replicas=1,
                 placement=None, watch_s=None, times=None, warm_up=False, **planner_options):
        """`max_batch`, `replicas`, `placement`: the config's, changed. `engine_class`: a SimEngine,
        or a class made from it (one that fails on purpose). `watch_s`: the engine runs under a
        watchdog with this time limit (a plain SimEngine replaces one that hangs). `times`: the
        robots' CallTimeSource. `warm_up`: the engines cache the skill sets' prompts first, as
        the planner node and `lrtrace simulate` do. Other options go to the Planner."""
        updates = {"replicas": replicas} if replicas != 1 else {}
        if max_batch is not None:
            updates["batch"] = config.batch.model_copy(update={"max_batch_size": max_batch})
        if placement is not None:
            updates["placement"] = placement
        config = config.model_copy(update=updates)
        self.clock, self.events, self.statuses = VirtualClock(), EventQueue(), []
        profile = load_engine_profile(config.engine_profile)
        if replicas == 1:
            engine = engine_class(profile, tokenizer, self.clock)
            if watch_s is not None:
                engine = WatchedEngine(engine, watch_s, lambda: SimEngine(profile, tokenizer, self.clock))
        else:  # each replica on a clock of its own, given by the replica set
            engine = ReplicaSet([engine_class(profile, tokenizer, VirtualClock()) for _ in range(replicas)])
        self.planner = Planner(config, get_policy(policy), engine, self.clock,
                               lambda listener: SimRobots(self.events.push, self.clock.now, times or CallTimeSource(0),
                                                          listener),
                               self.statuses.append, **planner_options)
        if warm_up:
            self.planner.warm_up()

    def submit(self, requests) -> None:
        """Each request arrives at its arrival time (at once where that has passed)."""
        for r in requests:
            self.events.push(r.arrival_s, lambda r=r: self.planner.submit(r))

    def run(self, each_step=None) -> None:
        """Until every task has ended. `each_step(planner)` after every planner step that ran."""
        while True:
            while self.events and self.events.next_time() <= self.clock.now():
                self.events.pop()()
            if self.planner.step(self.events.next_time() if self.events else math.inf):
                if each_step is not None:
                    each_step(self.planner)
            elif self.events:
                self.clock.advance_to(self.events.next_time())
            else:
                return

    def run_until(self, t_s: float) -> None:
        """Step the planner and deliver the robots' reports until the clock reaches `t_s`."""
        while self.clock.now() < t_s:
            while self.events and self.events.next_time() <= self.clock.now():
                self.events.pop()()
            if not self.planner.step(t_s):
                self.clock.advance_to(min(t_s, self.events.next_time()) if self.events else t_s)

    def first(self, state: TaskState) -> list[str]:
        """Task ids in the order they first reached `state`."""
        return list(dict.fromkeys(s.task_id for s in self.statuses if s.state == state))

    def sent(self, task_id: str) -> list[str]:
        """The segments dispatched to the task's robot."""
        return [s.segment_text for s in self.statuses if s.task_id == task_id and s.state == TaskState.EXECUTING]


def run_planner(config, tokenizer, requests, policy="timely", engine_class=None, then=(), **options):
    """`requests` driven to their end, then those of `then`; returns the planner and its statuses.
    `options`: Driven's."""
    each_step = options.pop("each_step", None)
    driven = Driven(config, tokenizer, policy, engine_class=engine_class or SimEngine, **options)
    for batch in (requests, then):
        driven.submit(batch)
        driven.run(each_step)
    return driven.planner, driven.statuses


def request(task_id, plan="mf(50);tp();", instruction="Scene: [door]. Fly forward.", robot_type="tello"):
    """A normal drone task arriving at 0 with its recorded plan."""
    return TaskRequest(task_id, "drone1", robot_type, instruction, "normal", Tuf(1, 1, 1.5), 0.0, plan)


def backlog_workload(n_normal=30, urgent_at=0.05, trace_ids=(3,)):
    """`n_normal` normal WID1 tasks at once, and an urgent one (trace 7) at `urgent_at`."""
    jobs = [Job(job_id=i, arrival_s=i * 0.001, agent=i, trace_id=trace_ids[i % len(trace_ids)])
            for i in range(n_normal)]
    jobs.append(Job(job_id=n_normal, arrival_s=urgent_at, agent=n_normal, trace_id=7))
    return Workload(name="backlog", duration_s=60, agents=n_normal + 1, jobs=jobs)
