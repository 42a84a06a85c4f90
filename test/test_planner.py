"""The planner core driven by hand on the sim engine: intake and rejection, the statuses of a
segmented task, streaming, what it learns as it goes, the hold and rtlm's plan sizes."""


import pytest
from driven import request, run_planner

from llm_planner.catalog.tokenizer import count_tokens
from llm_planner.domain.tasks import TaskRequest, TaskState
from llm_planner.domain.tuf import Tuf


def test_a_long_running_planner_keeps_only_the_latest_finished_records(config, tokenizer):
    """Memory stays bounded; a duplicate task_id is still found among the
    records kept."""
    planner, statuses = run_planner(config, tokenizer, [request(t) for t in "abcde"], keep_finished=2,
                                    then=[request("e")])
    assert sorted(planner.records) == ["d", "e"]
    assert [s.message for s in statuses if s.task_id == "e" and s.state == TaskState.REJECTED] == [
        "duplicate task_id 'e'"]
    assert [s.state for s in statuses if s.task_id == "a"][-1] == TaskState.SUCCEEDED

def test_bad_tasks_are_rejected_with_a_reason_and_the_rest_run(config, tokenizer):
    planner, statuses = run_planner(config, tokenizer, [
        request("ok"),
        request("ok"),  # duplicate id
        request("no-plan", plan=None),
        request("empty", instruction="   "),
        request("huge", instruction="x" * (64 * 1024 + 1)),
        request("robot", robot_type="submarine"),
        request("no-calls", plan="I am not sure what to do."),
    ])
    final = {s.task_id: s for s in statuses if s.state.terminal and s.task_id != "ok"}
    assert planner.records["ok"].state == TaskState.SUCCEEDED
    rejected = [s.message for s in statuses if s.task_id == "ok" and s.state == TaskState.REJECTED]
    assert rejected == ["duplicate task_id 'ok'"]
    assert "no recorded plan" in final["no-plan"].message and final["no-plan"].state == TaskState.REJECTED
    assert final["empty"].message == "empty instruction"
    assert "longer than" in final["huge"].message
    assert "unknown robot type" in final["robot"].message
    assert final["no-calls"].state == TaskState.FAILED and "no executable skill call" in final["no-calls"].message


def test_status_sequence_of_a_segmented_task(config, tokenizer):
    planner, statuses = run_planner(config, tokenizer, [request("t", plan="mf(50);tc(90);")], "timelyllm-paper")
    states = [s.state.name for s in statuses]
    assert states == ["QUEUED", "GENERATING", "EXECUTING", "SUSPENDED", "GENERATING", "EXECUTING", "SUCCEEDED"]
    executing = [s for s in statuses if s.state == TaskState.EXECUTING]
    assert [(s.segment_index, s.segment_text) for s in executing] == [(0, "mf(50);"), (1, "tc(90);")]


def test_timely_streams_without_pausing_when_the_engine_keeps_up(config, tokenizer):
    """A fast engine (the GPU profile) and a 2 s move: the next segment is ready long before
    the robot is free, so both go out as they are generated and the generation never pauses."""
    planner, statuses = run_planner(config, tokenizer, [request("t", plan="mf(50);tc(90);")])
    assert [s.state.name for s in statuses] == ["QUEUED", "GENERATING", "EXECUTING", "EXECUTING", "SUCCEEDED"]
    record = planner.records["t"]
    assert [s.unit_calls for s in record.segments] == [[1], [1]]
    assert record.utility == record.max_utility == 2.0
    done = statuses[-1]
    assert done.utility == pytest.approx(planner.records["t"].utility) and done.response_time_s < 1.0


def test_the_planner_learns_how_long_its_segments_typically_are(config, tokenizer):
    """Segments priced at l_max (10 tokens for the drone) before any is generated; after a
    plan, at the mean of the segments with a skill call that its skill set's plans had."""
    from llm_planner.catalog.skills import load_skill_set

    planner, _ = run_planner(config, tokenizer, [request("a", plan="mf(50);tc(90);")])
    skill_set = load_skill_set("minispec_drone")
    tokens = [count_tokens(tokenizer, s) for s in ("mf(50);", "tc(90);")]
    assert sum(tokens) / 2 < skill_set.segment_tokens
    assert planner.observed_segments.mean("minispec_drone") == pytest.approx(sum(tokens) / 2)
    planner.submit(request("b", plan="mf(50);"))
    gen = planner._gens["b"]
    assert gen.expected_segment_tokens == skill_set.segment_tokens
    assert gen.typical_segment_tokens == pytest.approx(sum(tokens) / 2)
    assert planner.observed_segments.mean("python_arm") is None  # nothing seen: l_max stands


def test_measured_call_times_are_kept_for_refits(config, tokenizer):
    planner, _ = run_planner(config, tokenizer, [request("m", plan="mf(50);tc(90);")])
    record = planner.records["m"]
    measured = [t for s in record.segments for t in s.call_times_s]
    samples = [(rt, skill, arg) for rt, skill, arg, _ in planner.exec_samples]
    assert samples == [("tello", "mf", 50.0), ("tello", "tc", 90.0)]
    assert [sec for *_, sec in planner.exec_samples] == measured

def ends_with_eos(profile, tokenizer, clock):
    """A SimEngine whose plans end as a model's do: the last text token, then one more step
    with the end-of-sequence token, which adds no text."""
    import dataclasses

    from llm_planner.engine import SimEngine
    from llm_planner.engine.base import TokenOutput

    class EndsWithEos(SimEngine):
        def step(self):
            result = super().step()
            return dataclasses.replace(result, outputs=[
                TokenOutput(o.gen_id, o.text, o.finished and not o.text, o.truncated) for o in result.outputs])

    return EndsWithEos(profile, tokenizer, clock)


@pytest.mark.parametrize("policy", ["timely", "vllm-stream", "timelyllm-paper"])
def test_a_plan_that_ends_after_its_last_segment_frees_its_robot_at_once(config, tokenizer, policy):
    """The end-of-sequence step comes after the plan's last segment was sent: an empty last
    segment tells the robot that the plan has ended, and the robot's next task starts as soon
    as it is sent (not after the robot's hold for the first task's next segment)."""
    planner, _ = run_planner(config, tokenizer, [request("a")], policy=policy, engine_class=ends_with_eos,
                             then=[request("b")])
    first, second = planner.records["a"], planner.records["b"]
    assert first.state == second.state == TaskState.SUCCEEDED
    assert first.plan == "mf(50);tp();" and "".join(s.text for s in first.segments) == first.plan
    assert first.segments[-1].last and [s.last for s in first.segments].count(True) == 1
    assert second.segments[0].dispatched_s > first.finished_s
    assert second.segments[0].started_s == second.segments[0].dispatched_s

def test_rtlm_keeps_a_plan_that_outruns_its_prediction_unfinished(config, tokenizer):
    """rtlm's consolidation reads what is left of each running plan: a plan that runs past its
    predicted size is re-predicted (as long as plans that got this far get), not taken to be
    all but done."""
    long_plan = "mf(50);tc(90);" * 12  # for a one-call instruction: far beyond its prediction
    seen = []

    def check(planner):
        for gen in planner._gens.values():
            if gen.in_engine and gen.tokens:
                seen.append((gen.tokens, gen.plan_tokens))

    planner, _ = run_planner(config, tokenizer, [request("long", plan=long_plan)], policy="rtlm", each_step=check)
    assert planner.records["long"].state == TaskState.SUCCEEDED
    first_size = seen[0][1]
    assert seen[-1][0] > 2 * first_size  # the plan did outrun its prediction
    assert all(size > tokens for tokens, size in seen)

def test_a_scan_whose_time_spreads_widely_waits_for_the_next_segment(config, tokenizer):
    """A lost first unit, a scan of 6.9 s on average (1.5 to 12 s by the exec model) and the
    next segment predicted 5.5 s away (0.55 s a token): at the mean the robot would not wait,
    but often it finishes first, so the scan goes to the robot with the calls after it."""
    from llm_planner.engine import SimEngine

    def slow_engine(profile, tokenizer, clock):
        return SimEngine(profile.model_copy(update={"decode_base_s": 0.55}), tokenizer, clock)

    task = TaskRequest("t", "drone1", "tello", "Scene: [bottle]. Scan for the bottle, then wait.", "normal",
                       Tuf(1, 1, 1.5), -5.0, "s('bottle');d(0.1);")
    planner, _ = run_planner(config, tokenizer, [task], engine_class=slow_engine)
    record = planner.records["t"]
    assert record.state == TaskState.SUCCEEDED
    assert [c.text for c in record.segments[0].calls] == ["s('bottle')", "d(0.1)"]


def test_the_hold_prices_segments_to_come_at_the_batch_the_queue_fills(config, tokenizer):
    """Generations kept in the queue (by latency-guided admission, by the batch shrinking for
    an urgent one) join the batch soon: in a crowded engine a plan's next segments decode at
    the step time of the batch they fill, up to the batch size, not at the running batch's."""
    config = config.model_copy(update={"batch": config.batch.model_copy(update={"max_batch_size": 4})})
    planner, _ = run_planner(config, tokenizer, [])  # idle: what is submitted below stays queued
    engine = planner.replicas[0].engine
    assert planner.estimates.loaded_step_s(engine) == engine.predict_step_s(1, 0)
    for i in range(2):
        planner.submit(request(f"t{i}"))
    assert planner.estimates.loaded_step_s(engine) == engine.predict_step_s(2, 0)
    for i in range(2, 8):
        planner.submit(request(f"t{i}"))
    assert planner.estimates.loaded_step_s(engine) == engine.predict_step_s(4, 0) > engine.predict_step_s(2, 0)


@pytest.mark.parametrize("level,tuf", [("normal", Tuf(1, 1, 1.5)), ("urgent", Tuf(2, 0.2, 0.5))])
def test_a_plans_lost_first_segment_waits_for_the_ones_after_it_at_every_level(config, tokenizer, level, tuf):
    """A slow engine (0.2 s a token), quick calls (0.1 s) and a task whose first unit is lost
    whenever it goes: streaming would leave the robot waiting before every later call, so
    `timely` holds the first segment back, an alert's as a normal plan's."""
    from llm_planner.engine import SimEngine

    def slow_engine(profile, tokenizer, clock):
        return SimEngine(profile.model_copy(update={"decode_base_s": 0.2}), tokenizer, clock)

    task = TaskRequest("t", "drone1", "tello", "Scene: [door]. Wait a little, four times.", level, tuf, -5.0,
                       "d(0.1);" * 4)
    planner, _ = run_planner(config, tokenizer, [task], engine_class=slow_engine)
    record = planner.records["t"]
    assert record.state == TaskState.SUCCEEDED
    assert len(record.segments[0].calls) > 1  # held: the first dispatch carries later segments too


def test_the_hold_sees_as_many_segments_to_come_as_the_skill_sets_finished_plans_had(config, tokenizer):
    """Without a predictor the segment lengths give only the next segment. Priced one segment
    ahead, the hold releases a plan's held units as soon as they cover the next segment's
    generation, and where the engine writes slower than the robot acts the robot then waits
    before every unit after it; so the hold prices as many segments as the skill set's
    finished plans had left, and before any finished, as many as the plan has so far."""
    plan = "mf(50);tc(90);mf(50);tc(90);tp();"  # five segments with a call
    planner, _ = run_planner(config, tokenizer, [])
    planner.submit(request("first", plan=plan))
    first = planner._gens["first"]
    assert planner.estimates.segments_to_come(first) == [first.skill_set.segment_tokens]
    first.call_segments = 3
    assert planner.estimates.segments_to_come(first) == [first.skill_set.segment_tokens] * 3
    planner, _ = run_planner(config, tokenizer, [request("done", plan=plan)])
    assert planner.records["done"].state == TaskState.SUCCEEDED
    planner.submit(request("next", plan=plan))
    gen = planner._gens["next"]
    assert planner.estimates.segments_to_come(gen) == [gen.skill_set.segment_tokens] * 5
    gen.call_segments = 2
    assert planner.estimates.segments_to_come(gen) == [gen.skill_set.segment_tokens] * 3
    gen.call_segments = 7  # longer than the plans seen: one more at least
    assert planner.estimates.segments_to_come(gen) == [gen.skill_set.segment_tokens]
