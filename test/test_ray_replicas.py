"""Engine replicas as Ray actors on a local cluster that listens on 127.0.0.1 only: they plan
exactly as replicas in the planner's process do, run side by side on the wall clock, and a
killed or hung replica fails only its own tasks while the planner goes on."""

import os
import sys
import time
from collections import Counter
from functools import partial

import pytest

ray = pytest.importorskip("ray")

from llm_planner.domain.clock import VirtualClock, WallClock  # noqa: E402
from llm_planner.domain.tasks import TaskState  # noqa: E402
from llm_planner.engine import SimEngine, load_engine_profile  # noqa: E402
from llm_planner.engine.base import GenerationRequest  # noqa: E402
from llm_planner.engine.factory import ReplicaPool, make_engine  # noqa: E402
from llm_planner.engine.ray_replica import RayEngine, start_ray  # noqa: E402
from llm_planner.lrtrace.compare import resolve_workload  # noqa: E402
from llm_planner.lrtrace.simulate import simulate  # noqa: E402
from llm_planner.planning.replicas import ReplicaSet  # noqa: E402

pytestmark = pytest.mark.ray

CPU_PROFILE = "smollm2-135m-instruct-float32-cpu-avx2"


@pytest.fixture(scope="module")
def cluster():
    # Functions of this module are built inside the actors: send them by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    start_ray()
    yield
    ray.shutdown()


def contended(config, replicas=2, placement="deadline"):
    return config.model_copy(update={"replicas": replicas, "placement": placement,
                                     "batch": config.batch.model_copy(update={"max_batch_size": 2})})


def short_wid2(config):
    return resolve_workload("wid2", None, config, 90.0, 3.0)


def outcome(result):
    return sorted((r.request.task_id, r.state, r.plan, round(r.first_token_s, 9), round(r.finished_s, 9),
                   r.gen_intervals, r.utility)
                  for r in result.records)


def test_the_local_cluster_listens_on_loopback_only(cluster):
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    assert all(node["NodeManagerAddress"] == "127.0.0.1" for node in ray.nodes())


def test_sim_replicas_on_ray_plan_exactly_as_in_process(cluster, config, tokenizer):
    """The same tokens in the same iterations: every task's plan and times are equal, with
    `deadline` placement moving suspended generations between the replicas."""
    config = contended(config)
    source = short_wid2(config)
    workload = source.workload(0)
    local = simulate(workload, source.traces, "timely", config, 0, tokenizer)
    pool = ReplicaPool(config)
    try:
        remote = simulate(workload, source.traces, "timely", config, 0, tokenizer, replica_pool=pool)
        assert all(e.pid != os.getpid() for e in pool.engines(2, VirtualClock()))
    finally:
        pool.close()
    assert len(local.records) == len(workload.jobs) > 20
    assert outcome(remote) == outcome(local)
    assert remote.engine_stats.steps == local.engine_stats.steps
    # generations moved between the replicas too (detached from one actor, attached to the other)
    assert remote.engine_stats.moved_in == local.engine_stats.moved_in > 0


def test_a_killed_replica_loses_no_task(cluster, config, tokenizer):
    """Replica 1's actor is killed mid-run: a new actor takes its place, the generations that
    were inside go on from their plans so far, the later tasks are planned, and every task
    succeeds with its plan."""
    config = contended(config, placement="round-robin")
    source = short_wid2(config)
    workload = source.workload(0)
    pool = ReplicaPool(config)
    victim = pool.engines(2, VirtualClock())[1]
    first_pid = victim.pid
    generating = Counter()

    lost = []

    def kill_on_the_tenth_generation(update):
        if "died" in update.message:
            lost.append(update)
        if update.state == TaskState.GENERATING:
            generating["n"] += 1
            if generating["n"] == 10:
                victim.kill()

    try:
        result = simulate(workload, source.traces, "timely", config, 0, tokenizer,
                          on_status=kill_on_the_tenth_generation, replica_pool=pool)
        steps_since_restart = victim.stats.steps
    finally:
        pool.close()
    assert len(result.records) == len(workload.jobs)
    assert all(r.state == TaskState.SUCCEEDED for r in result.records)
    traces, job_of = source.traces.by_id(), {j.task_id: j for j in workload.jobs}
    assert all(r.plan == traces[job_of[r.request.task_id].trace_id].plan for r in result.records)
    assert lost and all(u.state == TaskState.SUSPENDED and "engine replica 1" in u.message
                        and "the plan goes on from its" in u.message for u in lost)
    assert victim.pid != first_pid and steps_since_restart > 0  # a new actor, which planned later tasks


def test_a_killed_replica_is_restarted_and_plans_again(cluster, config, tokenizer):
    build = partial(make_engine, config)
    engine = RayEngine(build, VirtualClock(), "replica under test", cpus=0)
    try:
        engine.add(GenerationRequest("a", "p", "You plan.", "Scene: [door].", forced_output="mf(50);tp();"))
        engine.step()
        engine.kill()
        with pytest.raises(Exception, match="died"):
            engine.step()
        engine.restart()
        assert engine.running == []
        engine.add(GenerationRequest("b", "p", "You plan.", "Scene: [door].", forced_output="tp();"))
        text, finished = "", False
        while not finished:
            (out,) = engine.step().outputs
            text, finished = text + out.text, out.finished
        assert text == "tp();" and engine.running == ["b"] and engine.context_tokens("b") > 4
    finally:
        engine.close()


def sim_on(clock, profile=CPU_PROFILE):
    from llm_planner.catalog.tokenizer import load_tokenizer

    return SimEngine(load_engine_profile(profile), load_tokenizer(), clock)


class Hangs(SimEngine):
    def step(self):
        if self.stats.steps == 1:
            time.sleep(30)
        return super().step()


def hanging_sim_on(clock):
    from llm_planner.catalog.tokenizer import load_tokenizer

    return Hangs(load_engine_profile(CPU_PROFILE), load_tokenizer(), clock)


def test_replicas_on_the_wall_clock_run_side_by_side_and_a_hung_one_is_reported(cluster):
    """Live: two replicas' iterations overlap in real time; one that stops answering is
    reported as failed after the step time limit while the other goes on."""
    clock = WallClock()
    engines = [RayEngine(sim_on, clock, "fast", cpus=0), RayEngine(hanging_sim_on, clock, "hangs", cpus=0)]
    replicas = ReplicaSet(engines, virtual=False, step_timeout_s=2.0)
    try:
        for i, engine in enumerate(engines):
            engine.add(GenerationRequest(f"g{i}", "p", "You plan.", "Scene: [door].",
                                         forced_output="mf(50);tp();mf(50);tp();" * 4))
        started = clock.now()
        events = []
        while not any(e.error for e in events) and clock.now() - started < 20:
            events.append(replicas.step(clock))
        failed = [e for e in events if e.error is not None]
        assert len(failed) == 1 and failed[0].replica.index == 1
        assert "did not end an iteration within 2 s" in str(failed[0].error)
        assert 2.0 <= clock.now() - started < 5.0
        fast = [e for e in events if e.result is not None and e.replica.index == 0]
        assert len(fast) > 5  # replica 0 went on stepping while replica 1 hung
        engines[1].restart()
        assert engines[1].running == [] and replicas[1].free
    finally:
        for engine in engines:
            engine.kill()
