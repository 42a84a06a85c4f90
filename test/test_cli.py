import json

import pytest
from test_importer import ARTIFACT_JOBS, ARTIFACT_TRACES

from llm_planner.commands.lrtrace import main as lrtrace_main
from llm_planner.commands.maintenance import main as planner_main
from llm_planner.lrtrace.compare import compare, generated_traces, paired_reference, resolve_workload, variants
from llm_planner.lrtrace.formats import save
from llm_planner.lrtrace.metrics import METRIC_KEYS
from llm_planner.settings.config import load_planner_config


def test_compare_on_artifact_files_writes_the_documented_json(tmp_path, capsys):
    traces, jobs = tmp_path / "traces.json", tmp_path / "workload.json"
    traces.write_text(json.dumps(ARTIFACT_TRACES))
    jobs.write_text(json.dumps(ARTIFACT_JOBS))
    out = tmp_path / "out.json"
    rc = lrtrace_main(["compare", str(jobs), "--traces", str(traces), "--policies",
                       "timely,timelyllm-paper,vllm,vllm-stream,fcfs,edf", "--seeds", "2", "--json", str(out),
                       "--plots", str(tmp_path / "plots"), "--quiet"])
    assert rc == 0
    result = json.loads(out.read_text())
    recorded = result.pop("recorded traces")  # the plans of the trace set, beside the executed ones
    assert recorded == {"plans": {"plans": 3, "tokens_mean": recorded["plans"]["tokens_mean"], "units_mean": 2.0,
                                  "repeated_statement_fraction": 0.0}}
    assert list(result) == ["timely", "timelyllm-paper", "vllm", "vllm-stream", "fcfs", "edf"]
    for label, per_level in result.items():
        paired = per_level.pop("paired", None)  # the gap to timely, seed by seed
        assert (paired is None) == (label == "timely")
        if paired is not None:
            assert paired["reference"] == "timely" and paired["all"]["seeds"] == 2
            assert paired["all"]["min"] <= paired["all"]["mean"] <= paired["all"]["max"]
        assert set(per_level) == {"normal", "urgent", "all", "plans"}
        for level in ("normal", "urgent", "all"):
            assert set(per_level[level]) == set(METRIC_KEYS)
        assert per_level["all"]["tasks"] == 6  # 3 jobs x 2 seeds
        assert per_level["urgent"]["tasks"] == 2
        assert per_level["plans"]["plans"] == 6 and per_level["plans"]["units_mean"] == 2.0
        assert per_level["all"]["completion_p50_s"] > per_level["all"]["plan_done_p50_s"] > 0
    assert (tmp_path / "plots" / "utility_by_task.png").stat().st_size > 10_000
    assert (tmp_path / "plots" / "timeline.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "urgent tasks" in printed and "simulated s per wall s" in printed
    assert "timely minus each run" in printed


def test_compare_preset_and_errors(tmp_path, capsys):
    out = tmp_path / "o.json"
    assert lrtrace_main(["compare", "wid3", "--policies", "timely,vllm", "--json", str(out),
                         "--no-plots", "--quiet"]) == 0
    assert set(json.loads(out.read_text())["vllm"]) == {"normal", "all", "plans"}
    assert lrtrace_main(["compare", "wid3", "--policies", "vllm", "--duration", "5", "--no-plots", "--quiet"]) == 2
    assert "arrives in the first 5 s" in " ".join(capsys.readouterr().err.split())
    assert lrtrace_main(["compare", "wid3", "--policies", "vllm", "--ablation", "--duration", "15", "--json", str(out),
                         "--no-plots", "--quiet"]) == 0
    assert list(json.loads(out.read_text())) == ["vllm", "timely -hold", "timely -shrink", "timely -keep-running",
                                                 "timely -bound-wait", "timely -importance-guard",
                                                 "timely -latency-guided", "timely predictor=auto",
                                                 "recorded traces"]
    # a list runs only those switches
    assert lrtrace_main(["compare", "wid3", "--policies", "vllm", "--ablation", "shrink,predictor",
                         "--duration", "15", "--json", str(out), "--no-plots", "--quiet"]) == 0
    assert list(json.loads(out.read_text())) == ["vllm", "timely -shrink", "timely predictor=auto",
                                                 "recorded traces"]
    assert lrtrace_main(["compare", "wid3", "--ablation", "hold,pause", "--no-plots", "--quiet"]) == 2
    assert "unknown ablation switches ['pause']" in capsys.readouterr().err
    # --speed 3: the workload's arrivals three times as fast
    slow, fast = tmp_path / "slow.json", tmp_path / "fast.json"
    for path, speed in ((slow, "1"), (fast, "3")):
        assert lrtrace_main(["compare", "wid1", "--policies", "fcfs", "--duration", "30", "--speed", speed,
                             "--json", str(path), "--no-plots", "--quiet"]) == 0
    tasks = [json.loads(p.read_text())["fcfs"]["all"]["tasks"] for p in (slow, fast)]
    assert tasks[1] > 2 * tasks[0]  # the first 30 s hold three times the arrivals
    assert lrtrace_main(["compare", "wid1", "--speed", "0", "--no-plots", "--quiet"]) == 2
    assert lrtrace_main(["compare", "wid9", "--no-plots", "--quiet"]) == 2
    assert lrtrace_main(["compare", "wid1", "--policies", "timely,lifo", "--no-plots", "--quiet"]) == 2
    assert "unknown policies" in capsys.readouterr().err


def test_compose_and_import_round_trip(tmp_path):
    w = tmp_path / "w.yaml"
    assert lrtrace_main(["compose", "--preset", "wid2", "--seed", "7", "-o", str(w)]) == 0
    art = tmp_path / "traces.json"
    art.write_text(json.dumps(ARTIFACT_TRACES))
    assert lrtrace_main(["import", str(art), "-o", str(tmp_path / "t.yaml")]) == 0
    assert lrtrace_main(["simulate", str(w), "--policy", "edf", "--no-plots", "--quiet",
                         "--json", str(tmp_path / "s.json")]) == 0
    assert set(json.loads((tmp_path / "s.json").read_text())) == {"edf", "recorded traces"}


def test_import_refuses_texts_for_a_workload_that_has_none(tmp_path, capsys):
    w = tmp_path / "w.yaml"
    assert lrtrace_main(["compose", "--preset", "wid2", "--seed", "7", "-o", str(w)]) == 0
    out = tmp_path / "again.yaml"
    assert lrtrace_main(["import", str(w), "-o", str(out), "--texts", str(tmp_path / "texts.yaml")]) == 2
    assert "only a TimelyLLM artifact job list carries task texts" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "texts.yaml").exists()  # nothing half written


def test_compose_options_override_the_preset(tmp_path):
    from llm_planner.lrtrace.load import load_workload

    w = tmp_path / "w.yaml"
    assert lrtrace_main(["compose", "--preset", "wid2", "--agents", "7", "--duration", "40", "--rate", "0.5",
                         "-o", str(w)]) == 0
    workload, _ = load_workload(str(w))
    assert workload.agents == 7 and workload.duration_s == 40
    assert {j.agent for j in workload.jobs} <= set(range(7)) and max(j.arrival_s for j in workload.jobs) < 40


def test_fit_command(tmp_path, capsys):
    csv = tmp_path / "s.csv"
    csv.write_text("skill,arg,seconds\ng,,2.4\ng,,2.6\n")
    assert planner_main(["fit", str(csv), "--model", "tello", "-o", str(tmp_path / "m.yaml")]) == 0
    from llm_planner.catalog.exec_model import load_exec_model

    refit = load_exec_model(tmp_path / "m.yaml")
    assert refit.model_for("g").kind == "empirical" and refit.model_for("g").samples == [2.4, 2.6]
    assert planner_main(["fit", str(csv), "--model", "no_such_robot"]) == 2


def test_check_engine_checks_each_distinct_dtype_once_in_order():
    from llm_planner.commands.maintenance import checked_dtypes

    assert checked_dtypes(["config", "float32"], "float32") == ["float32"]  # AVX2: one engine, not two
    assert checked_dtypes(["config", "float32"], "bfloat16") == ["bfloat16", "float32"]
    assert checked_dtypes(None, "bfloat16") == ["bfloat16"]
    assert checked_dtypes(["float32", "config", "float32"], "float32") == ["float32"]


def test_generated_plans_become_a_trace_set_that_the_sim_engine_replays(tmp_path):
    config = load_planner_config()
    source = resolve_workload("config/jobs/urgent_under_load.yaml", "config/traces/timely_tasks.yaml", config)
    runs_of = variants(["vllm"], config)
    comparison = compare(source, runs_of, config, seeds=1)
    run = comparison.runs["vllm"][0]
    # stands in for a model that wrote another plan for the first task's trace
    first = min(run.records, key=lambda r: r.request.arrival_s)
    first.plan = "tp();"
    traces = generated_traces(comparison, source, "models/planner")
    used = {job.trace_id for job in source.workload(0).jobs}
    assert {t.trace_id for t in traces.traces} == used
    assert all(t.exec_times_s is None and t.source == "generated by models/planner" for t in traces.traces)
    save(traces, tmp_path / "generated.yaml")
    replayed = resolve_workload("config/jobs/urgent_under_load.yaml", str(tmp_path / "generated.yaml"), config)
    again = compare(replayed, runs_of, config, seeds=1).runs["vllm"][0].records
    trace_of = {job.task_id: job.trace_id for job in source.workload(0).jobs}
    changed = {task for task, trace in trace_of.items() if trace == trace_of[first.request.task_id]}
    expected = {r.request.task_id: "tp();" if r.request.task_id in changed else r.plan for r in run.records}
    assert {r.request.task_id: r.plan for r in again} == expected
    assert 1 <= len(changed) < len(expected)


def test_each_seed_starts_its_runs_one_variant_further_on(monkeypatch):
    """No variant always runs first (on the real engine, its place in the sequence could favour
    it); the results do not depend on the order (simulation)."""
    import llm_planner.lrtrace.compare as comparing

    config = load_planner_config()
    source = resolve_workload("config/jobs/urgent_under_load.yaml", "config/traces/timely_tasks.yaml", config)
    runs_of = variants(["timely", "vllm", "fcfs"], config)
    ran = []
    simulate = comparing.simulate

    def recording(workload, traces, policy, config, seed, *args, **kwargs):
        ran.append((seed, policy))
        return simulate(workload, traces, policy, config, seed, *args, **kwargs)

    monkeypatch.setattr(comparing, "simulate", recording)
    rotated = compare(source, runs_of, config, seeds=4)
    assert ran == [(0, "timely"), (0, "vllm"), (0, "fcfs"), (1, "vllm"), (1, "fcfs"), (1, "timely"),
                   (2, "fcfs"), (2, "timely"), (2, "vllm"), (3, "timely"), (3, "vllm"), (3, "fcfs")]
    assert list(rotated.runs) == ["timely", "vllm", "fcfs"]
    for label in ("timely", "vllm", "fcfs"):  # each seed's run, in seed order, as if run alone
        alone = compare(source, [v for v in runs_of if v.label == label], config, seeds=4)
        assert [[r.utility for r in run.records] for run in rotated.runs[label]] == \
            [[r.utility for r in run.records] for run in alone.runs[label]]


def test_again_runs_timely_a_second_time_and_its_gap_in_simulation_is_zero(tmp_path, capsys):
    out = tmp_path / "o.json"
    assert lrtrace_main(["compare", "config/jobs/urgent_under_load.yaml", "--traces", "config/traces/timely_tasks.yaml",
                         "--policies", "timely,vllm", "--ablation", "hold", "--again", "--seeds", "2",
                         "--json", str(out), "--no-plots", "--quiet"]) == 0
    result = json.loads(out.read_text())
    assert list(result) == ["timely", "vllm", "timely -hold", "timely again", "recorded traces"]
    again, timely = result["timely again"], result["timely"]
    for level in ("normal", "urgent"):
        assert again[level] == timely[level]  # the same planner on a deterministic engine
        assert again["paired"][level] == {"mean": 0.0, "sem": 0.0, "min": 0.0, "max": 0.0, "seeds": 2}
    assert result["vllm"]["paired"]["urgent"]["mean"] != 0.0  # a policy that differs does not pair to zero
    printed = " ".join(capsys.readouterr().out.split())
    assert "timely again normal +0.0" in printed
    assert lrtrace_main(["compare", "wid3", "--policies", "vllm", "--again", "--no-plots", "--quiet"]) == 2
    assert "add timely to --policies" in " ".join(capsys.readouterr().err.split())


def test_with_replicas_the_ablation_and_second_run_take_the_engines_of_the_timely_run_they_pair_with():
    config = load_planner_config()
    runs_of = variants(["vllm", "timely"], config, ablation=["hold"], replicas=[2, 1], placements=["deadline"],
                       again=True)
    labels = [v.label for v in runs_of]
    assert labels == ["vllm x2 deadline", "vllm x1", "timely x2 deadline", "timely x1",
                      "timely x2 deadline -hold", "timely x2 deadline again"]
    reference = paired_reference(labels)
    assert reference == "timely x2 deadline"
    engines = {v.label: (v.config.replicas, v.config.placement) for v in runs_of}
    assert engines["timely x2 deadline -hold"] == engines["timely x2 deadline again"] == engines[reference] == \
        (2, "deadline")
    assert not runs_of[4].config.features.hold and runs_of[5].config.features == runs_of[2].config.features
    assert paired_reference(["vllm", "timely", "timely again"]) == "timely"
    assert paired_reference(["vllm", "fcfs"]) == "vllm"


def test_save_traces_needs_the_real_engine(tmp_path, capsys):
    assert lrtrace_main(["compare", "wid1", "--duration", "30", "--save-traces", str(tmp_path / "t.yaml"),
                         "--no-plots", "--quiet"]) == 2
    assert "give --engine vllm" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "t.yaml").exists()


@pytest.mark.ros  # `lrtrace replay` loads the ROS 2 interfaces before it reads its options
def test_dtype_sets_the_real_engines_dtype_and_is_refused_for_the_sim_engine(capsys):
    import argparse

    from llm_planner.commands.lrtrace_shared import planner_config

    args = argparse.Namespace(config=None, engine="vllm", dtype="float32", max_batch=None)
    config = planner_config(args)
    assert config.vllm.engine_args["dtype"] == "float32"
    assert {k: v for k, v in config.vllm.engine_args.items() if k != "dtype"} == load_planner_config().vllm.engine_args
    assert "dtype" not in planner_config(argparse.Namespace(config=None, engine="vllm")).vllm.engine_args
    for command in (["compare", "wid1", "--duration", "30", "--no-plots", "--quiet"], ["replay", "live1"]):
        assert lrtrace_main([*command, "--dtype", "float32"]) == 2
        assert "--dtype float32 is the real engine's: give --engine vllm" in " ".join(capsys.readouterr().err.split())


def test_levels_keep_only_the_jobs_of_those_urgency_levels(capsys):
    from llm_planner.lrtrace.compare import parse_levels

    config = load_planner_config()
    full = resolve_workload("config/jobs/urgent_under_load.yaml", "config/traces/timely_tasks.yaml", config)
    urgent = resolve_workload("config/jobs/urgent_under_load.yaml", "config/traces/timely_tasks.yaml", config,
                              levels=parse_levels("urgent", config))
    records = compare(full, variants(["timely"], config), config, seeds=1).runs["timely"][0].records
    urgent_ids = {r.request.task_id for r in records if r.request.urgency_name == "urgent"}
    assert 0 < len(urgent_ids) < len(records)
    assert {j.task_id for j in urgent.workload(0).jobs} == urgent_ids
    assert lrtrace_main(["compare", "wid1", "--duration", "30", "--levels", "critical", "--quiet", "--no-plots"]) != 0
    assert "unknown urgency levels ['critical']" in capsys.readouterr().err


def test_repeated_live_runs_report_the_median_first_action_and_keep_each_run():
    from llm_planner.commands.lrtrace_live import pooled_first_actions

    one = {"idle_p50_s": 0.4, "load_p50_s": 0.5, "ratio": 1.25}
    assert pooled_first_actions([one]) == one
    runs = [one, {"idle_p50_s": 0.6, "load_p50_s": 0.9, "ratio": 1.5},
            {"idle_p50_s": 0.5, "load_p50_s": 0.6, "ratio": 1.2}]
    pooled = pooled_first_actions(runs)
    assert (pooled["idle_p50_s"], pooled["load_p50_s"]) == (0.5, 0.6)
    assert pooled["ratio"] == 1.2 and pooled["runs"] == runs


@pytest.mark.ros  # as above: `lrtrace replay`
def test_replay_refuses_fewer_than_one_repeat(capsys):
    assert lrtrace_main(["replay", "live1", "--repeat", "0"]) == 2
    assert "--repeat must be >= 1" in " ".join(capsys.readouterr().err.split())


def test_the_engine_line_counts_the_admissions_a_policy_deferred():
    """The real engine's line per policy says how often the batch controller held an admission
    back (summed over seeds), and says nothing of deferrals where there were none."""
    from llm_planner.engine.vllm_engine import VllmStats
    from llm_planner.lrtrace.compare import engine_stats_lines
    from llm_planner.lrtrace.simulate import SimulationResult

    def run(deferred: int) -> SimulationResult:
        return SimulationResult("timely", 0, "w", [], VllmStats(steps=10, generated_tokens=20), 1.0, 1.0, 0, deferred)

    timely, stream = engine_stats_lines({"timely": [run(3), run(4)], "vllm-stream": [run(0), run(0)]})
    assert timely.startswith("timely") and "; 7 admissions deferred" in timely
    assert "40 tokens in 20 steps" in timely
    assert "deferred" not in stream
