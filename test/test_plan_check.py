"""Judging plans: scenes in both input styles, plan validity, the statement repeat bound, the
task files the plan benchmark reads, and the corpus."""

import json
import os
from collections import Counter

import pytest

if not os.environ.get("LLM_PLANNER_REQUIRE_VLLM"):
    pytest.importorskip("xgrammar")

from llm_planner.catalog.scene import parse_task_text, render_task
from llm_planner.catalog.skills import load_skill_set
from llm_planner.catalog.statements import RepeatGuard, StatementSplitter
from llm_planner.engine.sim import SimEngine
from llm_planner.lrtrace.formats import FormatError
from llm_planner.lrtrace.plan_bench import generate_plans, report
from llm_planner.lrtrace.task_list import load_plan_tasks
from llm_planner.planning.plan_check import check_generated_plan
from llm_planner.predictor.rank import spearman
from llm_planner.settings.paths import data_path

ARTIFACT = ("Scene: [bolt x:0.21 y:0.33 width:0.02 height:0.05, nut x:0.44 y:0.35 width:0.02 height:0.02, "
            "bin x:0.80 y:0.70 width:0.15 height:0.15], Task: [A] Pick up the bolt and drop it in the bin.")


def test_scene_of_the_artifact_style():
    task = parse_task_text(ARTIFACT)
    assert task.object_names == ["bolt", "nut", "bin"]
    assert task.objects[0].attributes == {"x": 0.21, "y": 0.33, "width": 0.02, "height": 0.05}
    assert task.instruction == "Pick up the bolt and drop it in the bin."
    assert not task.error_follow_up
    assert parse_task_text(ARTIFACT.replace("[A]", "[E]")).error_follow_up


def test_both_styles_reach_the_model_in_one_form():
    assert render_task(ARTIFACT) == ("Objects: 'bolt' (left, far), 'nut' (centre, far, small), 'bin' (right, near, "
                                     "large)\nTask: Pick up the bolt and drop it in the bin.")
    assert render_task("Scene: [bolt, nut, bin]. Pick up the bolt and drop it in the bin.") == \
        "Objects: 'bolt', 'nut', 'bin'\nTask: Pick up the bolt and drop it in the bin."
    assert render_task(ARTIFACT.replace("[A]", "[E]")).endswith("Task: ALERT: Pick up the bolt and drop "
                                                                "it in the bin.")
    assert render_task("Fly up 50 cm.") == "Task: Fly up 50 cm."
    # the few-shot examples are shown in the same form
    arm = load_skill_set("minispec_arm")
    assert arm.chat_prefix()[1] == ("user", render_task(arm.spec.examples[0]["task"]))


def test_scene_of_the_project_style_and_alerts():
    task = parse_task_text("ALERT: a person is 20 cm away. Scene: [person, red block]. Move away.")
    assert task.object_names == ["person", "red block"]
    assert task.error_follow_up
    assert task.instruction == "ALERT: a person is 20 cm away. Move away."
    assert task.names_object("red block") and task.names_object("Person")
    assert not task.names_object("cup") and not task.names_object("")
    assert parse_task_text("Objects: ['apple', 'basket']. Put the apple away.").object_names == ["apple", "basket"]
    assert parse_task_text("Fly up.").objects == ()


@pytest.mark.parametrize("skill_set, plan, truncated, problems", [
    ("minispec_arm", "g('bolt');pk('bolt');g('bin');dr('bin');", False, []),
    ("minispec_arm", "g('bolt');pk('bolt');g('bin');dr('bin');", True, ["cut at the token limit"]),
    ("minispec_arm", "g('cup');pk('cup');", False, ["names what the scene and task do not: 'cup'"]),
    ("minispec_arm", "g('bolt')", False, ["plan ends in the middle of a statement"]),
    ("python_arm", "pick_up_bolt_and = pick_up_bolt_and\n", False, ["holds no skill call"]),
    ("python_arm", "x = object_x('bolt')\n", False, ["calls no action, only queries"]),
    ("python_arm", "take(objects)\n", False, ["reads variables nothing sets: objects"]),
    ("minispec_arm", "?_1>100{g('bolt')};", False, ["reads variables nothing sets: _1"]),
    ("minispec_arm", "d(100);g('bolt');", False, ["arguments outside what the robot accepts: d(100)"]),
    ("minispec_arm", "d(2.5);g('bolt');", False, []),
    ("minispec_arm", "_1=iv('bolt');?_1==True{g('bolt')};", False, []),
    ("python_arm", "for obj in ['bolt', 'spoon']:\n    take(obj)\n", False,
     ["grasps while the gripper holds an object: take(obj)", "names what the scene and task do not: 'spoon'"]),
    # the gripper holds one object: a second grasp needs a release between them
    ("minispec_arm", "g('bolt');pk('bolt');g('nut');pk('nut');g('bin');dr('bin');", False,
     ["grasps while the gripper holds an object: pk('nut')"]),
    ("minispec_arm", "g('bolt');pk('bolt');g('bin');dr('bin');g('nut');pk('nut');", False, []),
    ("minispec_arm", "2{g('bolt');pk('bolt')};", False, ["grasps while the gripper holds an object: pk('bolt')"]),
    ("minispec_arm", "2{g('bolt');pk('bolt');g('bin');dr('bin')};l('pk(1) done');", False, []),
    ("minispec_arm", "?iv('bolt')==True{g('bolt');pk('bolt')};g('nut');pk('nut');", False, []),  # held or not
    ("minispec_arm", "2{g('bolt');pk('bolt')", True,
     ["cut at the token limit", "plan ends in the middle of a statement",
      "grasps while the gripper holds an object: pk('bolt')"]),  # left open
    ("python_arm", "take('bolt')\nmove_to(0.5, 0.5)\ntake('nut')\n", False,
     ["grasps while the gripper holds an object: take('nut')"]),
    ("python_arm", "if is_holding():\n    drop('bin')\ntake('nut')\n", False, []),
    ("python_arm", "if not is_holding():\n    take('bolt')\ntake('nut')\n", False,
     ["grasps while the gripper holds an object: take('nut')"]),
    ("python_arm", "if object_x('bolt') > 0:\n    take('bolt')\nelse:\n    take('nut')\ndrop('bin')\n", False, []),
    ("python_arm", "for obj in ['bolt', 'nut']:\n    take(obj)\n    drop('bin')\n", False, []),
    ("python_arm", "move_to(0.21, 0.33)\ntake('bolt')\nmove_to(object_x('bin'), object_y('bin'))\ndrop('bin')\n",
     False, []),
])
def test_a_plan_is_valid_only_when_a_robot_can_run_it(skill_set, plan, truncated, problems):
    check = check_generated_plan(load_skill_set(skill_set), ARTIFACT, plan, truncated)
    assert check.problems == problems
    assert check.valid == (not problems)


def test_objects_named_in_the_task_text_count_and_free_text_does_not_matter():
    drone = load_skill_set("minispec_drone")
    text = "Scene: [desk, chair]. Find the bottle and say hello."
    assert check_generated_plan(drone, text, "s('bottle');g('bottle');l('hello there');").valid
    assert not check_generated_plan(drone, text, "g('bottles');").valid


def test_repeated_statements_and_segments_are_counted():
    drone = load_skill_set("minispec_drone")
    check = check_generated_plan(drone, "Survey.", "tp();tc(90);tp();tc(90);tp();")
    assert len(check.segments) == 5 and check.repeated_statements == 3
    assert check.calls == ["tp()", "tc(90)", "tp()", "tc(90)", "tp()"]


def test_statements_split_at_the_top_level_only():
    splitter = StatementSplitter("minispec")
    assert splitter.feed("mf(50);?iv('a;b')==True{g('a');tp()};t") == ["mf(50)", "?iv('a;b')==True{g('a');tp()}"]
    assert splitter.feed("p();") == ["tp()"]
    python = StatementSplitter("python")
    assert python.feed("for obj in ['a', 'b']:\n    take(obj)\nsay('x')") == ["for obj in ['a', 'b']:", "take(obj)"]


def test_the_repeat_guard_ends_runs_and_overused_statements():
    run = RepeatGuard("minispec", max_repeats=4, max_run=2)
    assert not run.feed("g('a');pk('a');g('a');")
    assert run.feed("g('a');")  # twice in a row
    survey = RepeatGuard("minispec", max_repeats=4, max_run=2)
    assert not survey.feed("tp();tc(90);tp();tc(90);tp();tc(90);")  # tc(90) three times, never in a row
    assert survey.feed("tp();")  # the fourth tp()
    # Fed in any pieces (a resumed generation re-reads its plan), the guard ends in the same state.
    pieces = RepeatGuard("python")
    for ch in "take('a')\ntake('a')\n":
        pieces.feed(ch)
    assert pieces.should_end


def test_task_files_of_every_kind(tmp_path):
    traces = load_plan_tasks(data_path("config", "traces", "timely_tasks.yaml"))
    assert len(traces) == 14 and all(t.recorded_plan for t in traces)
    lines = tmp_path / "tasks.jsonl"
    lines.write_text(json.dumps({"robot_type": "robot arm", "robot_system": "fltrnn python", "task_input": ARTIFACT})
                     + "\n\n" + json.dumps({"robot_type": "drone", "robot_system": "tello", "task_input": "Fly up."})
                     + "\n" + json.dumps({"robot_type": "drone", "robot_system": "tello", "task_input": "Fly up."}))
    tasks = load_plan_tasks(lines)
    assert [t.robot_type for t in tasks] == ["fltrnn_arm", "tello"]  # the repeated task counted once
    artifact_jobs = tmp_path / "jobs.json"
    artifact_jobs.write_text(json.dumps([{"job_id": 0, "trigger time": 0.0, "agent_id": 0, "trace_id": 3,
                                          "task_input": ARTIFACT, "robot_type": "robot arm",
                                          "robot_system": "indy7"}]))
    assert [t.robot_type for t in load_plan_tasks(artifact_jobs)] == ["indy7"]
    lines.write_text('{"robot_type": "drone"}\n')
    with pytest.raises(FormatError, match="tasks.jsonl:1: .*task_input"):
        load_plan_tasks(lines)
    with pytest.raises(FormatError, match="trace set"):
        load_plan_tasks(data_path("config", "workloads", "wid1.yaml"))


def test_the_benchmark_on_recorded_plans(tokenizer):
    """The sim engine replays the recorded plans: all are valid, and the report holds the keys."""
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine.profile import load_engine_profile
    from llm_planner.settings.config import load_planner_config

    config = load_planner_config()
    tasks = load_plan_tasks(data_path("config", "traces", "timely_tasks.yaml"))
    skill_sets = {t.robot_type: load_skill_set(config.robot_type(t.robot_type).skill_set) for t in tasks}
    engine = SimEngine(load_engine_profile(config.engine_profile), tokenizer, VirtualClock())
    runs = generate_plans(engine, tasks, skill_sets, max_tokens=100_000)
    result = report(runs)
    assert result["tasks"] == 14 and result["valid_rate"] == 1.0 and result["truncated_rate"] == 0.0
    assert [r.text for r in runs] == [t.recorded_plan for t in tasks]
    assert result["calls_mean"] == sum(len(r.check.calls) for r in runs) / 14
    assert set(result["robot_type"]) == {"tello", "indy7", "fltrnn_arm"}
    assert result["plans"][0]["skill_calls"] == ["s('bottle')", "g('bottle')", "tp()", "l('bottle photographed')"]
    for run in runs:  # tokens per segment, as the segmenter cut the token stream
        assert len(run.segment_tokens) == len(run.check.segments) and sum(run.segment_tokens) == run.tokens
    # a block closes with the token "};": the lone ';' left over is a final segment of no new token
    assert runs[3].segment_tokens[-1] == 0 and runs[3].check.segments[-1] == ";"
    no_plan = [t.__class__(**{**t.__dict__, "recorded_plan": None}) for t in tasks[:1]]
    with pytest.raises(ValueError, match="recorded plans"):
        generate_plans(engine, no_plan, skill_sets, 100)


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2], [5, 6, 7]) == pytest.approx(0.866, abs=1e-3)
    assert spearman([1, 2], [1, 2]) is None and spearman([1, 1, 1], [1, 2, 3]) is None


def test_the_corpus_covers_what_the_benchmark_needs():
    tasks = load_plan_tasks(data_path("config", "corpus", "plan_tasks.jsonl"))
    assert len(tasks) >= 150
    assert Counter(t.robot_type for t in tasks).keys() == {"tello", "indy7", "fltrnn_arm"}
    assert {t.kind for t in tasks} >= {"single", "multi", "search", "conditional", "error"}
    assert min(t.steps for t in tasks) == 1 and max(t.steps for t in tasks) == 8
    held = [t for t in tasks if t.split == "heldout"]
    assert abs(len(held) / len(tasks) - 1 / 3) < 0.02
    texts = [t.task_input for t in tasks]
    assert any("Task: [E]" in x for x in texts) and any("Task: [A]" in x for x in texts)
    assert any(x.startswith("Scene: [") and "Task:" not in x for x in texts)
    assert all(parse_task_text(x).objects for x in texts)


def test_a_plan_does_the_task_when_it_calls_the_required_skills_on_the_required_objects():
    from llm_planner.planning.task_check import TaskNeeds, check_task

    drone = load_skill_set("minispec_drone")
    needs = TaskNeeds(("tc|tu", "tp"), ("door",))
    assert check_task(drone, "tu(90);g('door');tp();", needs).does_task  # either turn will do
    missed = check_task(drone, "g('elevator');d(2);l('to the elevator');", needs)
    assert not missed.does_task and missed.missing_skills == ["tc|tu", "tp"] and missed.missing_objects == ["door"]
    assert not check_task(drone, "tc(90);tp();l('door');", TaskNeeds((), ("window",))).does_task
    arm = load_skill_set("python_arm")  # full skill names and objects named in a loop's list count
    plan = "for obj in ['peach', 'kiwi']:\n    move_to(object_x(obj), object_y(obj))\n    take(obj)\n    drop('bowl')\n"
    assert check_task(arm, plan, TaskNeeds(("take", "move_to"), ("peach", "kiwi"))).does_task


def test_a_plan_that_grasps_with_a_full_gripper_does_not_do_the_task():
    from llm_planner.planning.task_check import TaskNeeds, check_task

    arm = load_skill_set("minispec_arm")
    needs = TaskNeeds(("pk", "dr"), ("coin", "key", "tray"))
    one_by_one = "g('coin');pk('coin');g('tray');dr('tray');g('key');pk('key');g('tray');dr('tray');"
    assert check_task(arm, one_by_one, needs).does_task
    both_at_once = "g('coin');pk('coin');g('key');pk('key');g('tray');dr('tray');"
    held = check_task(arm, both_at_once, needs)
    assert not held.does_task and held.full_grasps == ["pk('key')"]
    assert held.missing == ["an empty gripper for pk('key')"]
    python = load_skill_set("python_arm")  # a loop's body that never releases grasps again
    loop = "for obj in ['peach', 'kiwi']:\n    move_to(object_x(obj), object_y(obj))\n    take(obj)\n"
    assert check_task(python, loop, TaskNeeds(("take",), ("peach", "kiwi"))).full_grasps == ["take(obj)"]


def test_the_task_rate_is_reported_per_robot_type_from_the_listed_needs(tmp_path, tokenizer):
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine.profile import load_engine_profile
    from llm_planner.settings.config import load_planner_config

    rows = [{"robot_type": "drone", "robot_system": "tello minispec", "task_input": "Scene: [door]. Photo of the door.",
             "task_plan": "g('door');tp();", "required_skills": ["g", "tp"], "required_objects": ["door"]},
            {"robot_type": "drone", "robot_system": "tello minispec", "task_input": "Scene: [cup]. Turn around.",
             "task_plan": "mf(50);", "required_skills": ["tc|tu"]},
            {"robot_type": "drone", "robot_system": "tello minispec", "task_input": "Scene: [cup]. Wait.",
             "task_plan": "d(2);"}]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    tasks = load_plan_tasks(path)
    config = load_planner_config()
    engine = SimEngine(load_engine_profile(config.engine_profile), tokenizer, VirtualClock())
    result = report(generate_plans(engine, tasks, {"tello": load_skill_set("minispec_drone")}, 100_000))
    assert result["task_rate"] == 0.5 and result["task_judged"] == 2  # the third lists no needs
    assert result["robot_type"]["tello"]["task_rate"] == 0.5
    assert [p["does_task"] for p in result["plans"]] == [True, False, None]
    assert result["plans"][1]["missing"] == ["tc|tu"]
    path.write_text(json.dumps({**rows[0], "required_skills": ["fly_away"]}))
    with pytest.raises(ValueError, match="fly_away"):
        generate_plans(engine, load_plan_tasks(path), {"tello": load_skill_set("minispec_drone")}, 100_000)
    path.write_text(json.dumps({**rows[0], "required_objects": "door"}))
    with pytest.raises(FormatError, match="required_objects"):
        load_plan_tasks(path)


def test_two_models_plans_side_by_side_in_markdown(tmp_path, tokenizer):
    from llm_planner.commands.plans import markdown_table
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine.profile import load_engine_profile
    from llm_planner.settings.config import load_planner_config

    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"robot_type": "drone", "robot_system": "tello minispec", "required_skills": ["tp"],
                                "task_input": "Scene: [door]. Photo.", "task_plan": "tp();"}) + "\n"
                    + json.dumps({"robot_type": "arm", "robot_system": "fltrnn python", "required_skills": ["say"],
                                  "task_input": "Scene: [bin]. Say | hi.", "task_plan": "say('hi')\nsay('hi')\n"}))
    tasks = load_plan_tasks(path)
    engine = SimEngine(load_engine_profile(load_planner_config().engine_profile), tokenizer, VirtualClock())
    skill_sets = {"tello": load_skill_set("minispec_drone"), "fltrnn_arm": load_skill_set("python_arm")}
    runs = generate_plans(engine, tasks, skill_sets, 100_000)
    lines = markdown_table(tasks, {"tuned": runs, "base": runs}).splitlines()
    assert lines[0] == "| task | tuned | does task | base | does task |" and len(lines) == 4
    assert lines[2] == "| Scene: [door]. Photo. | `tp();` | yes | `tp();` | yes |"
    assert lines[3].startswith("| Scene: [bin]. Say \\| hi. |")  # a | of the text does not end the cell
    assert "`say('hi')⏎ say('hi')`" in lines[3]  # a plan's lines stay in one row
    # the terminal table shows brackets as written (rich would read `[door]` as markup)
    from rich.console import Console

    from llm_planner.commands.plans import side_by_side

    console = Console(record=True, width=200)
    console.print(side_by_side(tasks, {"tuned": runs, "base": runs}))
    assert "Scene: [door]. Photo." in console.export_text()


def test_an_error_follow_up_must_open_with_one_of_its_safe_first_calls():
    from llm_planner.planning.task_check import TaskNeeds, check_task

    drone = load_skill_set("minispec_drone")
    needs = TaskNeeds(("mb|mu",), (), ("mb", "mu", "ml", "mr"))
    assert check_task(drone, "mb(50);d(1);", needs).does_task
    away_first = check_task(drone, "mf(20);mb(50);", needs)
    assert not away_first.does_task and away_first.wrong_first.startswith("first: mf(20)")
    in_block = check_task(drone, "?s('wall')==True{mb(50)};mb(50);", needs)
    assert not in_block.does_task and "a block" in in_block.wrong_first
    arm = load_skill_set("python_arm")
    assert check_task(arm, "move_to(object_x('cup'), object_y('cup'))\ntake('cup')\n",
                      TaskNeeds(("take",), ("cup",), ("move_to",))).does_task


def test_places_in_words_come_from_the_boxes():
    from llm_planner.catalog.scene import place_words

    task = parse_task_text("Scene: [cup_1 x:0.1 y:0.2 width:0.05 height:0.05, cup_2 x:0.9 y:0.8 width:0.3 "
                           "height:0.3, tray x:0.5 y:0.5 width:0.1 height:0.1], Task: [A] Take the cup on the left.")
    places = [place_words(o, task.objects) for o in task.objects]
    assert places == [["left", "far", "small"], ["right", "near", "large"], ["centre"]]


def test_two_reports_are_paired_task_by_task_with_a_sign_test(tmp_path, capsys):
    from llm_planner.commands.maintenance import main
    from llm_planner.lrtrace.plan_bench import format_p, paired, sign_test_p

    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(6, 1) == sign_test_p(1, 6) == pytest.approx(2 * (1 + 7) / 2**7)
    assert sign_test_p(10, 0) == pytest.approx(2 / 2**10) and sign_test_p(3, 3) == 1.0
    assert format_p(2 / 2**10) == "<0.01" and format_p(0.125) == "0.12"

    def plan(task_id, robot_type, does):
        return {"id": task_id, "robot_type": robot_type, "does_task": does}

    first = [plan("a", "tello", True), plan("b", "tello", True), plan("c", "tello", False),
             plan("d", "indy7", False), plan("e", "indy7", None)]
    second = [plan("e", "indy7", True), plan("d", "indy7", True), plan("c", "tello", False),
              plan("b", "tello", False), plan("a", "tello", True)]
    result = paired(first, second)
    assert {k: result[k] for k in ("both", "only_first", "only_second", "neither")} == {
        "both": 1, "only_first": 1, "only_second": 1, "neither": 1}  # "e" lists no needs in the first
    assert result["p"] == 1.0
    assert result["robot_type"]["tello"] | {"p": None} == {"both": 1, "only_first": 1, "only_second": 0,
                                                           "neither": 1, "p": None}
    assert result["robot_type"]["indy7"]["only_second"] == 1
    with pytest.raises(ValueError, match="different tasks"):
        paired(first, second[:-1])
    with pytest.raises(ValueError, match="twice"):
        paired(first + first[:1], second + second[-1:])

    # the command pairs two saved reports after checking both again
    def report_of(plans):
        rows = [{"id": "tello/1", "robot_type": "tello", "task_input": "Scene: [door]. Photograph the door.",
                 "required_skills": ["tp"], "required_objects": ["door"], "truncated": False, "tokens": 5},
                {"id": "tello/2", "robot_type": "tello", "task_input": "Scene: [cup]. Go up 50 cm.",
                 "required_skills": ["mu"], "truncated": False, "tokens": 4}]
        return {"engine": "vllm", "plans": [row | {"text": text} for row, text in zip(rows, plans)]}

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(report_of(["g('door');tp();", "mu(50);"])))
    b.write_text(json.dumps(report_of(["g('door');", "mu(50);"])))
    out = tmp_path / "paired.json"
    assert main(["plans", str(a), "--recheck", "--compare", str(b), "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["task_rate"] == 1.0 and saved["against"]["task_rate"] == 0.5
    assert {k: saved["paired"][k] for k in ("both", "only_first", "only_second")} == {
        "both": 1, "only_first": 1, "only_second": 0}
    assert "only a" in capsys.readouterr().out
    # a report made with --against: both models' plans are judged again and paired
    both = tmp_path / "both.json"
    base = report_of(["g('door');", "mu(50);"]) | {"model": "base"}
    both.write_text(json.dumps(report_of(["g('door');tp();", "mu(50);"]) | {"model": "tuned", "against": base}))
    assert main(["plans", str(both), "--recheck", "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["against"]["task_rate"] == 0.5 and saved["paired"]["only_first"] == 1
    assert "only base" in capsys.readouterr().out
    assert main(["plans", str(a), "--compare", str(b)]) == 2
    assert "needs --recheck" in capsys.readouterr().err
