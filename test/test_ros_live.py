"""`lrtrace replay` over ROS 2 with an in-process fleet, recorded to MCAP, and `lrtrace report`
reading the recording back."""

import json
import re

import jsonschema
import pytest
import ros_fixtures  # noqa: F401  (requires the built workspace)

from llm_planner.commands.lrtrace import main
from llm_planner.domain.tasks import TaskState
from llm_planner.ros.replay import read_recording, read_tasks
from llm_planner.view.channels import DECISIONS, SCHEMAS

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_replay_record_report(tmp_path, capsys):
    rec, out = tmp_path / "run.mcap", tmp_path / "live.json"
    rc = main(["replay", "live1", "--start-fleet", "--duration", "10", "--quiet", "--record", str(rec),
               "--json", str(out), "--compare-sim", "--grace", "60", "--idle-check", "--live-view", "0"])
    assert rc == 0
    captured = capsys.readouterr()
    assert re.search(r"live view at ws://127\.0\.0\.1:\d+", captured.err)
    result = json.loads(out.read_text())
    live, sim = result["timely"], result["timely (sim)"]  # the keys of `compare --json`
    assert live["all"]["tasks"] == sim["all"]["tasks"] > 0
    assert live["plans"]["plans"] == live["all"]["tasks"] and live["plans"]["tokens_mean"] > 0
    if "urgent" in live:  # measured against the same urgent tasks on the idle planner
        first = live["urgent_first_action"]
        # the ratio is of the unrounded medians; the JSON has them rounded to 0.1 ms
        assert first["idle_p50_s"] > 0
        assert first["ratio"] == pytest.approx(first["load_p50_s"] / first["idle_p50_s"], abs=0.005)
    tasks, statuses = read_recording(rec)
    assert len(tasks) == live["all"]["tasks"]
    assert {m.task_id for _, m in statuses if m.state == 4} == {m.task_id for _, m in tasks}
    printed = captured.out
    assert "live vs simulated" in printed and "largest live - simulated response (timely)" in printed
    report_json = tmp_path / "report.json"
    assert main(["report", str(rec), "--json", str(report_json)]) == 0
    reported = json.loads(report_json.read_text())["timely"]
    assert reported == {k: v for k, v in live.items() if k != "urgent_first_action"}
    # the recording holds the live view's channels, as Foxglove shows them live
    view = recorded_view(rec)
    assert set(view) == set(SCHEMAS)
    for topic, messages in view.items():
        for message in messages:
            jsonschema.validate(message, SCHEMAS[topic])
    ended = {d["task_id"] for d in view[DECISIONS] if d["kind"] == "ended" and d["reason"] == "succeeded"}
    assert ended == {m.task_id for _, m in tasks}
    capsys.readouterr()
    assert main(["explain", str(rec), "--task", sorted(ended)[0]]) == 0
    timeline = capsys.readouterr().out.splitlines()
    assert " queued " in timeline[1] and " ended " in timeline[-1] and "succeeded" in timeline[-1]


def recorded_view(path) -> dict[str, list[dict]]:
    from mcap.reader import make_reader

    messages: dict[str, list[dict]] = {}
    with open(path, "rb") as f:
        for _, channel, message in make_reader(f).iter_messages(topics=list(SCHEMAS)):
            messages.setdefault(channel.topic, []).append(json.loads(message.data))
    return messages


def test_replay_of_one_level_sends_only_its_jobs(tmp_path):
    """`--levels urgent`: only the urgent jobs are published, each at its time in the whole
    workload, and every one of them ends."""
    from llm_planner.lrtrace.compare import only_levels, resolve_workload
    from llm_planner.settings.config import load_planner_config

    config = load_planner_config()
    source = resolve_workload("live1", None, config, 20.0)
    urgent = only_levels(source.workload(0), source.traces, config, ["urgent"])
    assert 0 < len(urgent.jobs) < len(source.workload(0).jobs)
    rec, out = tmp_path / "urgent.mcap", tmp_path / "urgent.json"
    assert main(["replay", "live1", "--start-fleet", "--duration", "20", "--levels", "urgent", "--quiet",
                 "--record", str(rec), "--json", str(out), "--grace", "60"]) == 0
    result = json.loads(out.read_text())["timely"]
    assert "normal" not in result and result["urgent"]["tasks"] == len(urgent.jobs)
    recorded = read_tasks(rec)
    published = recorded.published
    assert sorted(published) == sorted(j.task_id for j in urgent.jobs) and recorded.urgent == set(published)
    assert set(recorded.reached(TaskState.SUCCEEDED)) == set(published)
    first = min(urgent.jobs, key=lambda j: j.arrival_s)
    for job in urgent.jobs:  # the gaps of the whole workload, not closed up
        gap = published[job.task_id] - published[first.task_id]
        assert gap == pytest.approx(job.arrival_s - first.arrival_s, abs=0.3)


def test_replay_repeats_rotate_the_policies_and_pair_their_runs(tmp_path, capsys):
    """`--repeat 2`: each policy replayed twice, the second time starting one policy further on,
    one recording per run, figures over both runs and each policy's gap to timely run by run."""
    rec, out = tmp_path / "rep.mcap", tmp_path / "rep.json"
    assert main(["replay", "live1", "--start-fleet", "--duration", "8", "--policies", "timely,vllm", "--repeat", "2",
                 "--quiet", "--record", str(rec), "--json", str(out), "--grace", "60"]) == 0
    printed = capsys.readouterr().out
    assert re.findall(r"^(\S+ \(run \d/2\)): recorded", printed, re.M) == [
        "timely (run 1/2)", "vllm (run 1/2)", "vllm (run 2/2)", "timely (run 2/2)"]
    result = json.loads(out.read_text())
    per_run = {}
    for policy in ("timely", "vllm"):
        for run in (1, 2):
            report_json = tmp_path / f"{policy}-{run}.json"
            assert main(["report", str(tmp_path / f"rep-{policy}-run{run}.mcap"), "--json", str(report_json)]) == 0
            per_run[policy, run] = json.loads(report_json.read_text())["timely"]["all"]
        assert result[policy]["all"]["tasks"] == per_run[policy, 1]["tasks"] + per_run[policy, 2]["tasks"] > 0
    assert "paired" not in result["timely"]
    paired = result["vllm"]["paired"]
    gaps = [per_run["timely", run]["utility_pct_of_max"] - per_run["vllm", run]["utility_pct_of_max"] for run in (1, 2)]
    assert paired["reference"] == "timely" and paired["all"]["seeds"] == 2
    assert paired["all"]["mean"] == pytest.approx(sum(gaps) / 2, abs=0.01)
    assert "timely minus each run, utility % of max, mean of 2 runs" in printed
