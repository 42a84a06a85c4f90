import numpy as np
import pytest

from llm_planner.lrtrace.composer import compose_preset, load_preset, mean_exec_times, preset_traces


@pytest.fixture(scope="module")
def wid1(config):
    preset = load_preset("wid1")
    traces = preset_traces(preset)
    return preset, traces, mean_exec_times(traces, config.robot_types)


def test_same_seed_same_workload(wid1):
    preset, traces, means = wid1
    a = compose_preset(preset, 3, traces, means)
    b = compose_preset(preset, 3, traces, means)
    assert a.model_dump() == b.model_dump()
    c = compose_preset(preset, 4, traces, means)
    assert [j.arrival_s for j in a.jobs] != [j.arrival_s for j in c.jobs]


def test_events_agents_and_spacing(wid1):
    preset, traces, means = wid1
    w = compose_preset(preset, 0, traces, means)
    assert w.jobs and all(0 <= j.arrival_s < preset.duration_s for j in w.jobs)
    assert {j.trace_id for j in w.jobs} <= set(preset.trace_ids)
    assert all(0 <= j.agent < preset.agents for j in w.jobs)
    # group jobs into events: tasks of one event are issued 1 ms apart
    events, current = [], [w.jobs[0]]
    for prev, job in zip(w.jobs, w.jobs[1:]):
        if job.arrival_s - prev.arrival_s <= 0.0011:
            assert job.arrival_s - prev.arrival_s == pytest.approx(0.001, abs=1e-6)
            current.append(job)
        else:
            events.append(current)
            current = [job]
    events.append(current)
    assert max(len(e) for e in events) <= preset.max_tasks_per_event
    assert len({j.agent for e in events for j in e if len(e) > 1}) > 1
    for e in events:
        assert len({j.agent for j in e}) == len(e)  # one task per agent per event
    # mean event rate near the preset's Poisson rate (loose: one 260 s sample)
    assert 0.5 * preset.rate_per_s < len(events) / preset.duration_s < 1.6 * preset.rate_per_s


def test_busy_agent_gets_no_new_task(wid1):
    preset, traces, means = wid1
    w = compose_preset(preset, 1, traces, means)
    by_id = traces.by_id()
    last: dict[int, float] = {}
    for job in w.jobs:
        if job.agent in last:
            assert job.arrival_s >= last[job.agent]
        trace = by_id[job.trace_id]
        last[job.agent] = job.arrival_s + 1.5 * (trace.plan_time_s + means[trace.trace_id])
    assert np.isfinite(list(last.values())).all()
