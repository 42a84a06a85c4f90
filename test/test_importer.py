import json

import pytest

from llm_planner.lrtrace.formats import FormatError
from llm_planner.lrtrace.load import load_traces, load_workload
from llm_planner.lrtrace.simulate import simulate

ARTIFACT_TRACES = {
    "1": {"trace_id": 1, "robot_type": "drone", "robot_system": "typefly", "task_input": "Scene: [cup]. Go to the cup.",
          "task_plan": "g('cup');tp();", "plan_time": 0.21, "task_exe_time": 2.5,
          "exe_time_detail": [["g(", 2.49], ["tp", 0.001]], "task_tuf": [1, 1, 1.5]},
    "2": {"trace_id": 2, "robot_type": "drone", "robot_system": "typefly",
          "task_input": "Alert: wall ahead. Scene: [wall].", "task_plan": "mb(30);mu(50);", "plan_time": 0.17,
          "task_exe_time": 4.1, "exe_time_detail": [["mb", 2.0], ["mu", 2.1]], "task_tuf": [2, 0.2, 0.5]},
    "3": {"trace_id": 3, "robot_type": "robot_arm", "robot_system": "fltrnn", "task_input": "Objects: ['cup'].",
          "task_plan": "move_to(object_x('cup'), object_y('cup'))\ntake('cup')\n", "plan_time": 1.2,
          "task_exe_time": 5.0, "exe_time_detail": [["move_to", 1.5], ["take", 3.5]], "task_tuf": [1, 1, 1.5]},
}
ARTIFACT_JOBS = [
    {"job_id": 0, "trigger time": 0.5, "agent_id": 0, "robot_type": "drone", "robot_system": "typefly", "trace_id": 1,
     "task_input": ARTIFACT_TRACES["1"]["task_input"], "exe_time_detail": [["g(", 2.61], ["tp", 0.001]],
     "task_exe_time": 2.611, "tuf": [1, 1, 1.5]},
    {"job_id": 1, "trigger time": 0.501, "agent_id": 1, "robot_type": "drone", "robot_system": "typefly", "trace_id": 2,
     "task_input": ARTIFACT_TRACES["2"]["task_input"], "exe_time_detail": [["mb", 1.9], ["mu", 2.2]],
     "task_exe_time": 4.1, "tuf": [2, 0.2, 0.5]},
    {"job_id": 2, "trigger time": 1.0, "agent_id": 2, "robot_type": "robot_arm", "robot_system": "fltrnn",
     "trace_id": 3, "task_input": "Objects: ['cup'].", "exe_time_detail": [], "task_exe_time": 5.0,
     "tuf": [1, 1, 1.5]},
]


@pytest.fixture()
def artifact(tmp_path):
    traces, jobs = tmp_path / "traces.json", tmp_path / "workload.json"
    traces.write_text(json.dumps(ARTIFACT_TRACES))
    jobs.write_text(json.dumps(ARTIFACT_JOBS))
    return traces, jobs


def test_import_trace_set(artifact):
    traces = load_traces(artifact[0]).by_id()
    assert traces[1].robot_type == "tello" and traces[1].plan == "g('cup');tp();"
    assert traces[2].urgency == "urgent" and traces[2].tuf == (2, 0.2, 0.5)
    assert traces[3].robot_type == "fltrnn_arm"
    assert traces[1].exec_times_s == [2.49, 0.001]


def test_import_workload(artifact):
    workload, texts = load_workload(artifact[1])
    assert [j.job_id for j in workload.jobs] == [0, 1, 2]
    assert workload.jobs[1].arrival_s == 0.501 and workload.jobs[1].tuf == (2, 0.2, 0.5)
    assert workload.jobs[0].exec_times_s == [2.61, 0.001]
    assert workload.jobs[2].exec_times_s is None
    assert workload.agents == 3
    assert texts.by_id()[2].instruction.startswith("Alert") and texts.by_id()[2].plan == ""


def test_simulation_uses_the_jobs_measured_times(artifact, config, tokenizer):
    workload, _ = load_workload(artifact[1])
    traces = load_traces(artifact[0])
    result = simulate(workload, traces, "timely", config, seed=0, tokenizer=tokenizer)
    records = {r.request.task_id: r for r in result.records}
    assert {r.state.name for r in records.values()} == {"SUCCEEDED"}
    assert [t for s in records["job0"].segments for t in s.call_times_s] == [2.61, 0.001]
    assert [t for s in records["job1"].segments for t in s.call_times_s] == [1.9, 2.2]
    assert records["job1"].request.urgency_name == "urgent"
    arm_times = [t for s in records["job2"].segments for t in s.call_times_s]
    assert len(arm_times) == 4 and 1.0 <= arm_times[2] <= 3.0  # sampled: object queries + move_to, take


def test_a_recorded_one_line_python_plan_replays_call_by_call(tmp_path, config, tokenizer):
    """A trace whose task_plan is written on one line (`def task(): a; b; ...`), as many LLM
    planners emit them: imported and simulated, it is sent as one segment per call and every
    call is executed, in order."""
    plan = "def task(): move_to(0.2, 0.3); take('box'); move_to(0.5, 0.6); drop('box')"
    trace = {**ARTIFACT_TRACES["3"], "task_plan": plan, "exe_time_detail": [
        ["move_to", 1.0], ["take", 2.0], ["move_to", 1.5], ["drop", 2.5]]}
    job = {**ARTIFACT_JOBS[2], "trigger time": 0.0, "exe_time_detail": trace["exe_time_detail"]}
    (tmp_path / "traces.json").write_text(json.dumps({"3": trace}))
    (tmp_path / "jobs.json").write_text(json.dumps([job]))
    workload, _ = load_workload(tmp_path / "jobs.json")
    record = simulate(workload, load_traces(tmp_path / "traces.json"), "timely", config, 0, tokenizer).records[0]
    assert record.state.name == "SUCCEEDED"
    assert [s.call_texts for s in record.segments] == [
        ["move_to(0.2, 0.3)"], ["take('box')"], ["move_to(0.5, 0.6)"], ["drop('box')"]]
    assert [t for s in record.segments for t in s.call_times_s] == [1.0, 2.0, 1.5, 2.5]
    assert all(s.finished_s <= n.started_s for s, n in zip(record.segments, record.segments[1:]))


@pytest.mark.parametrize("content", ["[]", "{\"a\": 1}", "[{\"job_id\": 0}]", "not json"])
def test_unrecognised_files_are_rejected(tmp_path, content):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(FormatError):
        load_workload(path)
    with pytest.raises(FormatError):
        load_traces(path)


def test_bad_artifact_values_are_reported(tmp_path):
    jobs = [dict(ARTIFACT_JOBS[0], exe_time_detail=[["g(", "slow"]])]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(jobs))
    with pytest.raises(FormatError, match="job 0"):
        load_workload(path)
