"""The list of simulated results in docs/results and the tool that remakes and checks them."""

import json
import shutil

import pytest

from llm_planner.commands import results as sim_results
from llm_planner.commands.results import RESULTS, differences, load_manifest, write_configs
from llm_planner.settings.config import load_planner_config

# A quick entry of the list (held-out arms, 3 seeds, the urgent tasks alone): seconds to rerun.
QUICK = "contention/arm_heavy-x3-batch2-urgent-only"


def test_every_listed_result_is_stored_and_each_config_is_a_valid_planner_config(tmp_path):
    configs, inputs, runs = load_manifest()
    missing = [run.out for run in runs if not (RESULTS / f"{run.out}.json").is_file()]
    assert not missing, f"listed in {sim_results.MANIFEST.name} but not stored: {missing}"
    assert QUICK in {run.out for run in runs}
    write_configs(configs, tmp_path)
    for name in configs:
        config = load_planner_config(tmp_path / f"{name}.yaml")
        assert config.model_dump() != load_planner_config(sim_results.BASE_CONFIG).model_dump(), name
    assert load_planner_config(tmp_path / "lost-wait-10.yaml").features.lost_wait_s == 10
    made = {line.split(" -o ")[1] for line in inputs}
    read = {arg for run in runs for arg in run.args if arg.startswith("out/")}
    assert read <= made, f"runs read inputs nothing makes: {read - made}"


def _manifest(tmp_path, body: str):
    path = tmp_path / "m.yaml"
    path.write_text(body)
    return path


def test_a_manifest_with_an_unknown_config_or_setting_a_repeated_result_or_an_unfilled_name_is_refused(tmp_path):
    with pytest.raises(ValueError, match="names config 'fast'"):
        load_manifest(_manifest(tmp_path, "runs:\n  - {out: a, run: compare wid1, config: fast}\n"))
    with pytest.raises(ValueError, match="more than one run writes a/x1"):
        load_manifest(_manifest(tmp_path, "runs:\n  - {out: 'a/x{S}', run: compare wid1, for: {S: [1, 1]}}\n"))
    with pytest.raises(ValueError, match="no `for` values for S"):
        load_manifest(_manifest(tmp_path, "runs:\n  - {out: 'a/x{S}', run: 'compare wid1 --speed {S}'}\n"))
    for typo in ("features.lost_wait", "policy.name", "feature.lost_wait_s"):
        with pytest.raises(ValueError, match=f"{typo} is not a setting"):
            write_configs({"typo": {typo: 3}}, tmp_path)


def test_each_combination_of_for_values_is_one_run(tmp_path):
    _, _, runs = load_manifest(_manifest(tmp_path, (
        "configs: {w10: {features.lost_wait_s: 10}, w20: {features.lost_wait_s: 20}}\n"
        "runs:\n  - {out: 'r/{W}-w{L}', run: 'compare {W} --speed 3 --markdown {out}.md', config: 'w{L}',\n"
        "     for: {W: [wid1, wid2], L: [10, 20]}}\n")))
    assert [(r.out, r.config) for r in runs] == [("r/wid1-w10", "w10"), ("r/wid1-w20", "w20"),
                                                  ("r/wid2-w10", "w10"), ("r/wid2-w20", "w20")]
    command = runs[0].command(tmp_path, tmp_path / "x")
    assert command[0].endswith("lrtrace") and command[1:3] == ["--config", str(tmp_path / "w10.yaml")]
    assert command[3:] == ["compare", "wid1", "--speed", "3", "--markdown", f"{tmp_path / 'x'}.md", "--no-plots",
                           "--json", f"{tmp_path / 'x'}.json", "--quiet"]


def test_differences_name_each_changed_figure_and_each_label_on_one_side_only():
    stored = {"timely": {"urgent": {"utility_pct_of_max": 80.0, "tasks": 12}}, "fcfs": {"urgent": {}}}
    assert differences(stored, json.loads(json.dumps(stored))) == []
    now = {"timely": {"urgent": {"utility_pct_of_max": 66.7, "tasks": 12}}, "edf": {"urgent": {}}}
    assert sorted(differences(stored, now)) == ["edf: only in the rerun", "fcfs: only in the stored result",
                                                "timely / urgent / utility_pct_of_max: 80.0 -> 66.7"]
    assert differences({"a": float("nan")}, {"a": float("nan")}) == []


@pytest.mark.slow
def test_check_passes_on_the_stored_result_and_names_the_figure_that_differs(tmp_path, capsys):
    stored = tmp_path / "stored"
    (stored / "contention").mkdir(parents=True)
    shutil.copy(RESULTS / f"{QUICK}.json", stored / f"{QUICK}.json")
    assert sim_results.main(["check", "--only", QUICK, "--stored", str(stored)]) == 0
    assert f"{QUICK}: same" in capsys.readouterr().out

    result = json.loads((stored / f"{QUICK}.json").read_text())
    result["timely"]["urgent"]["utility_pct_of_max"] += 10
    (stored / f"{QUICK}.json").write_text(json.dumps(result))
    assert sim_results.main(["check", "--only", QUICK, "--stored", str(stored)]) == 1
    out = capsys.readouterr().out
    assert "1 difference\n" in out and "timely / urgent / utility_pct_of_max" in out

    assert sim_results.main(["remake", "--only", QUICK, "--stored", str(stored)]) == 0
    assert json.loads((stored / f"{QUICK}.json").read_text()) == json.loads((RESULTS / f"{QUICK}.json").read_text())
    assert "utility" in (stored / f"{QUICK}.txt").read_text()


# One quick entry per engine profile the stored results run on (the default's and each CPU
# class's): a change that moves simulated figures fails here until `make results` remakes them.
STALENESS_CANARIES = [QUICK, "contention/arm_heavy-x1-sim-cpu-bf16", "contention/arm_heavy-x1-sim-cpu-avx2",
                      "contention/arm_heavy-x1-sim-cpu-avx512-float32"]


@pytest.mark.slow
@pytest.mark.parametrize("entry", STALENESS_CANARIES)
def test_stored_results_are_what_the_code_makes_now(entry, capsys):
    assert sim_results.main(["check", "--only", entry]) == 0, capsys.readouterr().out[-2000:]
