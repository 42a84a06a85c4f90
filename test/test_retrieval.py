"""Retrieved examples: the corpus's nearest tuning tasks, shown before a task's own turn."""

import json

import pytest

from llm_planner.catalog.scene import render_task
from llm_planner.catalog.skills import load_skill_set
from llm_planner.catalog.tokenizer import count_tokens
from llm_planner.engine.sim import EXAMPLE_TEMPLATE_TOKENS
from llm_planner.planning.prompts import plan_request
from llm_planner.planning.retrieval import ExampleIndex, examples_for


def _row(skill_set: str, task: str, plan: str, split: str = "tune") -> dict:
    return {"skill_set": skill_set, "task_input": task, "task_plan": plan, "split": split}


ROWS = [
    _row("minispec_drone", "Scene: [door]. Back up 50 cm.", "mb(50);"),
    _row("minispec_drone", "Scene: [cup]. How many cups are there?", "l(p('how many cups are there?'));"),
    _row("minispec_drone", "Scene: [cup, desk]. Fly to the cup.", "g('cup');"),
    _row("minispec_drone", "Scene: [box]. Climb 2 metres.", "mu(200);"),
    _row("minispec_arm", "Scene: [bolt]. Pick up the bolt.", "g('bolt');pk('bolt');"),
]


def test_nearest_examples_share_the_instructions_words_and_the_nearest_comes_last():
    index = ExampleIndex(ROWS)
    found = index.nearest("minispec_drone", "Scene: [cup, chair]. How many cups are there? Fly to them.", 3)
    assert [plan for _, plan in found] == ["g('cup');", ROWS[1]["task_plan"]]  # none shares no word
    assert found[-1] == (render_task(ROWS[1]["task_input"]), ROWS[1]["task_plan"])
    # every number is one term: "50" alone would find "Back up 50 cm."
    assert index.nearest("minispec_drone", "Scene: [wall]. Climb 50 cm.", 1)[0][1] == "mu(200);"
    assert index.nearest("minispec_drone", "Scene: [wall]. Zigzag!", 3) == ()  # no term in common


def test_examples_come_from_the_tasks_skill_set_and_its_tuning_split_only():
    rows = ROWS + [_row("minispec_drone", "Scene: [kite]. Pick up the kite now.", "g('kite');", split="heldout")]
    index = ExampleIndex(rows)
    found = index.nearest("minispec_drone", "Scene: [kite]. Pick up the kite now.", 10)
    plans = [plan for _, plan in found]
    assert "g('kite');" not in plans  # held out
    assert "g('bolt');pk('bolt');" not in plans  # another skill set
    assert plans == ["g('cup');", "mb(50);"]  # "the", "up"
    assert index.nearest("python_arm", "Scene: [kite]. Pick up the kite.", 3) == ()
    assert index.nearest("minispec_drone", "Scene: [kite]. Pick up the kite.", 0) == ()


def test_a_missing_or_bad_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="example corpus"):
        ExampleIndex.load(tmp_path / "none.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not JSON"):
        ExampleIndex.load(bad)
    bad.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"skill_set": "minispec_drone", "task_input": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: no task_plan"):
        ExampleIndex.load(bad)


def test_a_corpus_file_is_read_and_k_zero_shows_none(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    assert examples_for("minispec_drone", "Scene: [door]. Back up 1 m.", 0, str(corpus)) == ()
    assert examples_for("minispec_drone", "Scene: [door]. Back up 1 m.", 1, str(corpus))[0][1] == "mb(50);"
    skill_sets = ExampleIndex.load("config/tuning/corpus.jsonl").skill_sets
    assert skill_sets == ["minispec_arm", "minispec_drone", "python_arm"]


def test_the_sim_engine_prefills_the_examples_as_the_tasks_own_tokens(tokenizer):
    from llm_planner.domain.clock import VirtualClock
    from llm_planner.engine import SimEngine, load_engine_profile

    engine = SimEngine(load_engine_profile("smollm2-135m-instruct-bfloat16-cpu-avx512-bf16"), tokenizer, VirtualClock())
    skill_set = load_skill_set("minispec_drone")
    task = "Scene: [door]. Back off 40 cm."
    examples = ExampleIndex(ROWS).nearest("minispec_drone", task, 2)
    plain = plan_request("a", skill_set, task, "mb(40);")
    shown = plan_request("b", skill_set, task, "mb(40);", examples=examples)
    assert shown.examples == examples and shown.prompt == plain.prompt
    added = sum(count_tokens(tokenizer, u) + count_tokens(tokenizer, a) + EXAMPLE_TEMPLATE_TOKENS for u, a in examples)
    assert engine.prompt_tokens(shown) - engine.prompt_tokens(plain) == added > 0
