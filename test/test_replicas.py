"""Several engine replicas behind one planner: their iterations overlap in simulated time, a
placement policy puts each generation on one, and a fault in one fails only its own tasks."""

import math

import pytest
from driven import Driven

from llm_planner.domain.clock import VirtualClock
from llm_planner.domain.tasks import TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf
from llm_planner.engine import SimEngine, load_engine_profile
from llm_planner.engine.base import EngineError, GenerationRequest
from llm_planner.lrtrace.compare import parse_counts, parse_placements, variants
from llm_planner.planning.replicas import ReplicaSet
from llm_planner.sched.placement import Candidate, ReplicaLoad, make_placement

CPU_PROFILE = "smollm2-135m-instruct-float32-cpu-avx2"  # step time grows with the batch


def sim_engine(profile, tokenizer, engine_class=SimEngine, clock=None):
    return engine_class(load_engine_profile(profile), tokenizer, clock or VirtualClock())


def generation(gen_id, plan="mf(50);tp();mf(50);tp();"):
    return GenerationRequest(gen_id, "p", "You plan.", f"Scene: [door]. {gen_id}", forced_output=plan)


def request(task_id, robot="drone1", plan="mf(50);tp();mf(50);tp();", urgency="normal", arrival=0.0):
    return TaskRequest(task_id, robot, "tello", "Scene: [door]. Fly forward.", urgency, Tuf(1, 1, 1.5), arrival, plan)


def run(config, tokenizer, requests, replicas=2, placement="deadline", max_batch=1, engine_class=SimEngine,
        policy="timely"):
    """The planner with `replicas` sim engines, driven as `lrtrace simulate` drives it, until
    every task has ended."""
    driven = Driven(config, tokenizer, policy, max_batch, engine_class, replicas=replicas, placement=placement,
                    warm_up=True)
    driven.submit(requests)
    driven.run()
    return driven.planner, driven.statuses


# ----------------------------------------------------------------- stepping side by side
def test_replicas_step_side_by_side_in_simulated_time(tokenizer):
    """Two replicas, one generation each: both advance by one token per iteration and the
    clock moves by one iteration's time, not two."""
    replicas = ReplicaSet([sim_engine(CPU_PROFILE, tokenizer) for _ in range(2)])
    for i, replica in enumerate(replicas):
        replica.engine.add(generation(f"g{i}"))
    clock = VirtualClock()
    ends = []
    for _ in range(6):
        event = replicas.step(clock)
        assert event.result is not None and event.error is None
        ends.append((clock.now(), event.replica.index, [o.gen_id for o in event.result.outputs]))
    assert [e[2] for e in ends] == [["g0"], ["g1"]] * 3
    # each pair of iterations ends at the same time: they ran in parallel
    assert all(math.isclose(ends[i][0], ends[i + 1][0]) for i in range(0, 6, 2))
    solo_clock = VirtualClock()
    alone = ReplicaSet([sim_engine(CPU_PROFILE, tokenizer, clock=solo_clock)])
    alone[0].engine.add(generation("g0"))
    for _ in range(3):
        alone.step(solo_clock)
    assert math.isclose(clock.now(), solo_clock.now())


def test_replicas_do_not_step_past_the_next_outside_event(tokenizer):
    replicas = ReplicaSet([sim_engine(CPU_PROFILE, tokenizer) for _ in range(2)])
    replicas[0].engine.add(generation("g0"))
    clock = VirtualClock()
    event = replicas.step(clock, until_s=1e-6)
    assert event.result is None and event.error is None and clock.now() == 1e-6
    assert not replicas[0].free  # its iteration is still under way
    event = replicas.step(clock)
    assert event.result is not None and clock.now() > 1e-6


def test_a_second_replica_plans_a_second_task_at_once(config, tokenizer):
    """Two tasks at once and one batch slot per replica: with two replicas both are
    generated from the start; with one, the second waits for the first's slot."""
    tasks = [request("a", "drone1"), request("b", "drone2")]
    two, _ = run(config, tokenizer, tasks, replicas=2)
    one, _ = run(config, tokenizer, tasks, replicas=1)
    firsts_two = sorted(r.first_token_s for r in two.records.values())
    firsts_one = sorted(r.first_token_s for r in one.records.values())
    assert math.isclose(firsts_two[0], firsts_two[1], rel_tol=1e-6)
    assert firsts_one[1] > firsts_one[0] + 0.01
    assert {r.state for r in two.records.values()} == {TaskState.SUCCEEDED}
    assert all(replica.engine.stats.steps > 0 for replica in two.replicas)


@pytest.mark.parametrize("placement", ["round-robin", "least-tokens", "deadline"])
def test_every_task_ends_under_every_placement(config, tokenizer, placement):
    tasks = [request(f"t{i}", f"drone{i % 3}", arrival=0.05 * i, urgency="urgent" if i % 4 == 0 else "normal")
             for i in range(12)]
    planner, statuses = run(config, tokenizer, tasks, replicas=3, placement=placement, max_batch=2)
    assert len(planner.records) == 12
    assert {r.state for r in planner.records.values()} == {TaskState.SUCCEEDED}
    assert planner.active_tasks == 0 and not planner.busy
    assert sum(replica.engine.stats.generated_tokens > 0 for replica in planner.replicas) >= 2


def test_a_fault_in_one_replica_loses_no_task(config, tokenizer):
    """The replica whose step fails loses the generations inside it and is restarted; they go
    on from their plans so far (on whichever replica admits them first), and every task,
    later ones included, succeeds with the plan it would have had."""

    class FailsOnce(SimEngine):
        failed = False

        def step(self):
            if not FailsOnce.failed and self.stats.steps == 2 and self.running == ["b"]:
                FailsOnce.failed = True
                raise EngineError("device lost (injected)")
            return super().step()

    tasks = [request("a", "drone1"), request("b", "drone2"), request("c", "drone3", arrival=5.0)]
    planner, statuses = run(config, tokenizer, tasks, replicas=2, placement="round-robin", engine_class=FailsOnce)
    assert FailsOnce.failed
    lost = [s for s in statuses if s.task_id == "b" and "was restarted" in s.message]
    assert len(lost) == 1 and "engine replica 1 was restarted; the plan goes on from its" in lost[0].message
    assert lost[0].state == TaskState.SUSPENDED
    assert {t: planner.records[t].state for t in "abc"} == dict.fromkeys("abc", TaskState.SUCCEEDED)
    assert {t: planner.records[t].plan for t in "abc"} == {t: r.recorded_plan for t, r in zip("abc", tasks)}
    assert all(statuses[-1].state.terminal for statuses in [[s for s in statuses if s.task_id == t] for t in "abc"])


def test_a_bug_in_one_replica_ends_the_run_with_its_traceback(config, tokenizer):
    """Only an EngineError is a fault a restart mends; another exception from a replica's
    iteration is a bug and goes up, with no replica restarted."""

    class Buggy(SimEngine):
        def step(self):
            if self.stats.steps == 2 and self.running == ["b"]:
                raise KeyError("a bug (injected)")
            return super().step()

    tasks = [request("a", "drone1"), request("b", "drone2")]
    with pytest.raises(KeyError, match="a bug"):
        run(config, tokenizer, tasks, replicas=2, placement="round-robin", engine_class=Buggy)


# ----------------------------------------------------------------- moving a generation
def test_a_detached_generation_goes_on_in_another_engine_where_it_stopped(tokenizer):
    """The plan so far is prefilled again with the prompt, and the tokens that follow are the
    ones the first engine would have produced (the sim engine replays the recorded plan)."""
    plan = "mf(50);tp();mf(50);tp();"
    first, second = sim_engine(CPU_PROFILE, tokenizer), sim_engine(CPU_PROFILE, tokenizer)
    first.add(generation("g", plan))
    moved_text = "".join(first.step().outputs[0].text for _ in range(4))
    with pytest.raises(EngineError, match="only a suspended one moves"):
        first.detach("g")
    first.suspend("g")
    continuation = first.detach("g")
    assert continuation.tokens == 4 and first.running == [] and "g" not in first.stats.resumes
    with pytest.raises(EngineError, match="unknown generation"):
        first.context_tokens("g")
    second.attach(continuation)
    assert second.context_tokens("g") == first.stats.prefill_tokens["g"] + 4  # its prompt and the plan so far
    prefilled_before = second.stats.prefill_tokens["g"]
    finished = False
    while not finished:
        (out,) = second.step().outputs
        moved_text, finished = moved_text + out.text, out.finished
    assert moved_text == plan
    assert second.stats.prefill_tokens["g"] - prefilled_before == first.stats.prefill_tokens["g"] + 4
    assert second.stats.moved_in == 1


def test_deadline_placement_moves_a_suspended_generation_off_a_busy_replica(config, tokenizer):
    """Under the paper's policy every generation pauses after each segment. With one place per
    replica, a long plan pauses on replica 0 while an urgent task with one long segment takes
    that place; once replica 1 is free, `deadline` moves the plan there (prefilling it again)
    instead of leaving it to wait; the other placements keep it where its context is."""
    long_plan = "mf(50);" * 12
    alert_plan = "l('" + "the red door on the left " * 8 + "');"  # one long segment
    tasks = [request("long", "drone1", plan=long_plan), request("other", "drone2", plan="mf(50);" * 3),
             request("alert", "drone3", plan=alert_plan, urgency="urgent", arrival=0.3)]
    moved, _ = run(config, tokenizer, tasks, replicas=2, placement="deadline", policy="timelyllm-paper")
    kept, _ = run(config, tokenizer, tasks, replicas=2, placement="least-tokens", policy="timelyllm-paper")
    for planner in (moved, kept):
        assert {r.state for r in planner.records.values()} == {TaskState.SUCCEEDED}
        assert planner.records["long"].plan == long_plan
    assert sum(r.engine.stats.moved_in for r in moved.replicas) >= 1
    assert sum(r.engine.stats.moved_in for r in kept.replicas) == 0
    assert moved.records["long"].plan_done_s < kept.records["long"].plan_done_s


# ----------------------------------------------------------------- placement policies
def load(index, engine, running=0, waiting=0, tokens=0.0, max_batch=4, slot_free_s=0.0):
    return ReplicaLoad(index, engine, max_batch, running, 200 * running, waiting, tokens, slot_free_s)


def test_round_robin_takes_the_replicas_in_turn(tokenizer):
    engine = sim_engine(CPU_PROFILE, tokenizer)
    policy = make_placement("round-robin")
    loads = [load(i, engine, running=3 - i) for i in range(3)]
    chosen = []
    for _ in range(5):
        index = policy.choose(Candidate("x", 50, 10, 30), loads)
        policy.placed(index)
        chosen.append(index)
    assert chosen == [0, 1, 2, 0, 1]


def test_least_tokens_counts_what_each_replica_still_has_to_write(tokenizer):
    engine = sim_engine(CPU_PROFILE, tokenizer)
    policy = make_placement("least-tokens")
    loads = [load(0, engine, tokens=100), load(1, engine, tokens=40)]
    assert policy.choose(Candidate("x", 50, 10, 30), loads) == 1
    loads[1].placed.append(Candidate("y", 50, 10, 80))  # 40 + 80 > 100
    assert policy.choose(Candidate("x", 50, 10, 30), loads) == 0


def test_deadline_placement_goes_where_the_segment_ends_first(tokenizer):
    engine = sim_engine(CPU_PROFILE, tokenizer)
    policy = make_placement("deadline")
    candidate = Candidate("x", 50, 12, 40)
    # a smaller batch decodes faster on this CPU profile
    busy, light = load(0, engine, running=3, tokens=10), load(1, engine, running=1, tokens=500)
    assert light.segment_end_s(candidate) < busy.segment_end_s(candidate)
    assert policy.choose(candidate, [busy, light]) == 1
    # a full batch first waits for a slot
    full = load(1, engine, running=4, max_batch=4, slot_free_s=5.0)
    assert policy.choose(candidate, [busy, full]) == 0
    assert not policy.at_arrival and make_placement("least-tokens").at_arrival


def test_an_unknown_placement_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="round-robin, least-tokens, deadline"):
        make_placement("random")
    with pytest.raises(ValueError, match="unknown placements"):
        parse_placements("deadline,closest")
    with pytest.raises(ValueError, match="positive"):
        parse_counts("2,0")


def test_compare_runs_each_policy_on_each_replica_count_and_placement(config):
    runs = variants(["timely", "vllm"], config, replicas=[1, 2], placements=["round-robin", "deadline"])
    assert [v.label for v in runs] == ["timely x1", "timely x2 round-robin", "timely x2 deadline",
                                       "vllm x1", "vllm x2 round-robin", "vllm x2 deadline"]
    assert [(v.config.replicas, v.config.placement) for v in runs[:3]] == [(1, config.placement), (2, "round-robin"),
                                                                          (2, "deadline")]


@pytest.mark.vllm  # VllmStats comes with the real engine's module
def test_the_stats_of_several_real_engine_replicas_merge_field_by_field(tokenizer):
    """Every field of two replicas' VllmStats merged: counts summed, the largest batch the
    larger one, per-generation counts and samples (step corrections too) kept from each."""
    import dataclasses

    from llm_planner.engine.calibration import StepCorrection
    from llm_planner.engine.vllm_engine import VllmStats

    def filled(n: int) -> VllmStats:
        stats = VllmStats()
        for f in dataclasses.fields(stats):
            value = getattr(stats, f.name)
            if f.name == "step_corrections":
                value = [StepCorrection(decode_offset_s=0.001 * n)]
            elif isinstance(value, dict):
                value = {f"g{n}": n}
            elif isinstance(value, list):
                value = [float(n)]
            else:
                value = type(value)(n)
            setattr(stats, f.name, value)
        return stats

    replicas = ReplicaSet([sim_engine(CPU_PROFILE, tokenizer) for _ in range(2)])
    replicas[0].engine.stats, replicas[1].engine.stats = filled(1), filled(2)
    merged = replicas.stats
    for f in dataclasses.fields(merged):
        value = getattr(merged, f.name)
        if f.name == "max_batch":
            assert value == 2
        elif f.name == "step_corrections":
            assert [c.decode_offset_s for c in value] == [0.001, 0.002]
        elif isinstance(value, dict):
            assert value == {"g1": 1, "g2": 2}, f.name
        elif isinstance(value, list):
            assert value == [1.0, 2.0], f.name
        else:
            assert value == 3, f.name
