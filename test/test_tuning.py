"""The tuning corpus and the tuned model's plumbing (no training here: that is `llm-planner
tune-model`, tens of minutes)."""

import json
from collections import Counter
from pathlib import Path

import pytest

from llm_planner.catalog.scene import parse_task_text
from llm_planner.catalog.skills import load_skill_set
from llm_planner.planning.plan_check import check_generated_plan
from llm_planner.planning.prompts import plan_request, shared_request
from llm_planner.planning.task_check import TaskNeeds, check_task
from llm_planner.settings.paths import data_path
from llm_planner.tuning.corpus import build_corpus, load_corpus

CORPUS = data_path("config", "tuning", "corpus.jsonl")


@pytest.fixture(scope="module")
def rows():
    return load_corpus(CORPUS)


@pytest.mark.slow  # regenerates and re-checks all 4,050 rows, one grammar compile each (8 s)
def test_the_committed_corpus_is_what_the_generators_write(rows):
    assert [r.as_json() for r in build_corpus()] == [r.as_json() for r in rows]


def test_the_corpus_covers_every_skill_set_and_kind_of_task(rows):
    assert len(rows) >= 1500
    per_set = Counter(r.skill_set for r in rows)
    assert set(per_set) == {"minispec_drone", "minispec_arm", "python_arm"} and min(per_set.values()) >= 300
    kinds = {r.kind for r in rows}
    assert {"single", "multi", "repeat", "search", "conditional", "vague", "error", "absent"} <= kinds
    assert any("ALERT:" in r.task_input for r in rows) and any(" m." in r.task_input for r in rows)
    assert len({r.task_input for r in rows}) == len(rows)


def test_loops_conditionals_and_follow_ups_wrap_steps_of_every_kind(rows):
    """Compositions, not a fixed body per kind: a counted loop, a conditional or a failure alert
    around many different steps."""
    def bodies(template_names):
        return {r.task_plan for r in rows if r.template in template_names and r.skill_set == "minispec_drone"}

    loops = {plan.split("{", 1)[1] for plan in bodies({"repeat_drone", "step_then_repeat"})}
    assert len({plan.split("(")[0] for plan in loops}) >= 6  # the loop's first call: a move, turn, photo...
    conditionals = bodies({"if_seen_drone"})
    assert len({plan.split("{", 1)[1].split("(")[0] for plan in conditionals}) >= 5
    assert all(r.task_input.startswith("ALERT:") for r in rows if r.template.startswith("after_failure"))


def test_every_plan_runs_and_does_its_task(rows):
    for r in rows:
        skill_set = load_skill_set(r.skill_set)
        assert check_generated_plan(skill_set, r.task_input, r.task_plan).valid, r.id
        needs = TaskNeeds(tuple(r.required_skills), tuple(r.required_objects))
        assert needs.skills and check_task(skill_set, r.task_plan, needs).does_task, r.id


def test_a_hazard_recovery_moves_away_first_then_finishes_the_plan_without_flying_into_it(rows):
    from llm_planner.catalog.hazards import hazard_directions, unsafe_first_moves

    drone = load_skill_set("minispec_drone")
    recoveries = [r for r in rows if r.template in ("hazard_artifact", "hazard_request", "hazard_warning")]
    assert len(recoveries) >= 150
    finished = 0
    for r in recoveries:
        calls = drone.find_calls(r.task_plan)
        ways = [drone.skill(call.skill).moves for call in calls]
        if r.template != "hazard_warning":  # a plain warning is no alert: the planner's rule leaves it be
            assert ways[0] not in unsafe_first_moves(r.task_input), r.id
        if r.template == "hazard_artifact":
            into = hazard_directions(r.task_input)
            assert ways[0] is not None and not set(ways) & set(into), r.id  # a move away, never one into it
            finished += len(calls) > 1
    artifact = [r for r in recoveries if r.template == "hazard_artifact"]
    assert finished >= 0.8 * len(artifact)  # most go on with the plan after getting clear


def test_the_python_arm_acts_only_on_objects_its_scene_lists(rows):
    searches = [r for r in rows if r.template in ("arm_search_python", "arm_search_else")]
    assert any("else:\n" in r.task_plan for r in searches) and any("if object_x(" in r.task_plan for r in searches)
    for r in searches:
        listed = parse_task_text(r.task_input).object_names  # whole names: 'cup' is not 'cup holder'
        for obj in r.required_objects:
            assert obj in listed, r.id
        if "say('there is no" in r.task_plan and "if " not in r.task_plan:
            assert r.task_plan.split("no ", 1)[1].split("'")[0] not in listed, r.id


def _arguments(skill_set, plan: str, skills: tuple[str, ...]) -> list[str]:
    """The argument of each call of these skills, in order."""
    return [c.text.split("(", 1)[1].rstrip(")") for c in skill_set.find_calls(plan) if c.skill in skills]


def test_several_objects_go_to_several_places_within_each_skill_sets_own_limit(rows):
    """Sorting, two destinations and swaps by way of a spare place, for both arms. The Python
    arm's plans may run past MiniSpec's token limit (its syntax takes about twice the tokens)
    but stay within its own."""
    from llm_planner.catalog.tokenizer import load_tokenizer
    from llm_planner.tuning.corpus import PLAN_TOKEN_LIMIT

    tokenizer = load_tokenizer()
    for name in ("minispec_arm", "python_arm"):
        skill_set = load_skill_set(name)
        many = [r for r in rows if r.skill_set == name and r.template in ("put_apart", "two_groups", "swap")]
        assert {r.template for r in many} == {"put_apart", "two_groups", "swap"}, name
        for r in many:
            drops = _arguments(skill_set, r.task_plan, ("dr", "drop"))
            assert len(set(drops)) >= 2, r.id  # more than one place
        for r in (r for r in many if r.template == "swap"):  # one goes aside, the other over, then back
            picks = _arguments(skill_set, r.task_plan, ("pk", "take"))
            drops = _arguments(skill_set, r.task_plan, ("dr", "drop"))
            assert picks[0] == picks[2] != picks[1] and len(set(drops)) == 3, r.id
        lengths = [len(tokenizer.encode(r.task_plan).ids) for r in rows if r.skill_set == name]
        assert max(lengths) < PLAN_TOKEN_LIMIT * skill_set.plan_token_scale
    python_lengths = [len(tokenizer.encode(r.task_plan).ids) for r in rows if r.skill_set == "python_arm"]
    assert max(python_lengths) >= PLAN_TOKEN_LIMIT  # tasks only the scaled limit lets it answer


def test_the_held_out_part_is_worded_in_ways_the_tuning_part_never_is(rows):
    tune = {(r.template, r.phrasing) for r in rows if r.split == "tune"}
    heldout = [r for r in rows if r.split == "heldout"]
    assert 0.2 <= len(heldout) / len(rows) <= 0.45
    assert not {(r.template, r.phrasing) for r in heldout} & tune
    whole = {r.template for r in heldout} - {r.template for r in rows if r.split == "tune"}
    assert len(whole) >= 3  # templates seen only in the held-out part


def test_a_tuned_skill_set_is_prompted_the_short_way():
    drone = load_skill_set("minispec_drone")
    few_shot, tuned = shared_request(drone), shared_request(drone, tuned=True)
    assert len(few_shot.chat_prefix) > 1 and len(tuned.chat_prefix) == 1
    assert tuned.prefix_key != few_shot.prefix_key  # the engine caches the two prefixes apart
    request = plan_request("t", drone, "Scene: [door]. Fly to the door.", tuned=True)
    assert request.chat_prefix == drone.tuned_chat_prefix() and "Objects: 'door'" in request.prompt


def test_a_tuned_model_folder_says_its_base_and_skill_sets(tmp_path):
    from llm_planner.engine.models import TUNING_MANIFEST, timing_model_name, tuned_skill_sets

    folder = tmp_path / "smollm2-135m-planner"
    folder.mkdir()
    assert tuned_skill_sets(folder) == frozenset() and timing_model_name(folder) == "smollm2-135m-planner"
    (folder / TUNING_MANIFEST).write_text(json.dumps({"base_model": "smollm2-135m-instruct",
                                                      "skill_sets": ["minispec_drone"], "adapter_sha256": "x"}))
    assert tuned_skill_sets(folder) == {"minispec_drone"} and timing_model_name(folder) == "smollm2-135m-instruct"


@pytest.mark.slow
def test_set_up_merges_an_adapter_once_per_adapter(tmp_path, monkeypatch):
    """An adapter (here an untrained one) merged into the base model's folder, with the
    manifest; a second call finds it done; another adapter is merged anew."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from llm_planner.engine.models import default_model_dir, prepare_tuned_model, tuning_manifest

    base = default_model_dir()
    if not (base / "config.json").is_file():
        pytest.skip("the base model is converted by `make setup`")
    (tmp_path / "cache" / "models").mkdir(parents=True)
    (tmp_path / "cache" / "models" / base.name).symlink_to(base)
    monkeypatch.setenv("LLM_PLANNER_CACHE", str(tmp_path / "cache"))

    def adapter(folder, seed):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
        config = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], task_type="CAUSAL_LM",
                            init_lora_weights=False)
        get_peft_model(model, config).save_pretrained(str(folder))
        (folder / "training.json").write_text(json.dumps({"skill_sets": ["minispec_arm"]}))
        return folder

    first = adapter(tmp_path / "a", 0)
    merged = prepare_tuned_model(log=lambda _: None, adapter=first)
    manifest = tuning_manifest(merged)
    assert manifest["base_model"] == base.name and manifest["skill_sets"] == ["minispec_arm"]
    stamp = (merged / "model.safetensors").stat().st_mtime_ns
    assert prepare_tuned_model(log=lambda _: None, adapter=first) == merged
    assert (merged / "model.safetensors").stat().st_mtime_ns == stamp  # done once
    prepare_tuned_model(log=lambda _: None, adapter=adapter(tmp_path / "b", 1))
    assert tuning_manifest(merged)["adapter_sha256"] != manifest["adapter_sha256"]
    elsewhere = prepare_tuned_model(log=lambda _: None, adapter=first, target=tmp_path / "a" / "model")
    assert elsewhere == tmp_path / "a" / "model" and tuning_manifest(elsewhere) == manifest
    assert tuning_manifest(merged)["adapter_sha256"] != manifest["adapter_sha256"]  # the default folder untouched
    (tmp_path / "other-base").symlink_to(base)  # another base model, by its folder's name
    onto = prepare_tuned_model(log=lambda _: None, adapter=first, target=tmp_path / "c", base=tmp_path / "other-base")
    assert tuning_manifest(onto)["base_model"] == "other-base"
    (first / "training.json").write_text(json.dumps({"skill_sets": ["minispec_arm"], "base_model": "other-base"}))
    with pytest.raises(ValueError, match="was tuned from other-base, not smollm2-135m-instruct"):
        prepare_tuned_model(log=lambda _: None, adapter=first, target=tmp_path / "d")


def test_a_batch_with_shared_prefixes_learns_exactly_what_the_whole_chats_teach():
    """The loss and LoRA gradients of a batch computed with each group's prefix run once equal
    those of the whole right-padded chats (a small random Llama; groups of different prefix
    lengths, and examples of different lengths)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_planner.testing.whole_chat_loss import whole_chat_loss
    from llm_planner.tuning.train import batch_loss, with_shared_prefixes

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "down_proj"],
                      init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(LlamaForCausalLM(config), lora)

    def example(system, prompt, answer):
        ids = system + prompt + answer
        return ids, [-100] * (len(system) + len(prompt)) + answer

    encoded = [example([1, 2, 3, 4, 5], [9, 10], [20, 21, 22]),
               example([1, 2, 3, 4, 5], [11, 12, 13], [23, 24]),
               example([1, 2, 6], [14], [25, 26, 27, 28]),
               example([1, 2, 6], [15, 16, 17], [29])]
    examples = with_shared_prefixes(encoded, ["a", "a", "b", "b"])
    assert [e.prefix for e in examples] == [5, 5, 3, 3]
    assert with_shared_prefixes(encoded[:1], ["a"])[0].prefix == 6  # one example: all but the last prompt token

    def gradients(loss):
        model.zero_grad()
        loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    shared = batch_loss(model, examples, pad=0, device="cpu")
    shared_grads = gradients(shared)
    whole = whole_chat_loss(model, encoded, pad=0)
    whole_grads = gradients(whole)
    assert float(shared.detach()) == pytest.approx(float(whole.detach()), rel=1e-5)
    assert shared_grads.keys() == whole_grads.keys() and len(shared_grads) == 16
    for name, grad in whole_grads.items():
        assert torch.allclose(shared_grads[name], grad, rtol=1e-4, atol=1e-6), name
    with pytest.raises(ValueError, match="no prompt"):
        with_shared_prefixes([([5, 6], [5, 6])], ["a"])


def test_embedding_noise_perturbs_the_inputs_while_training_only_and_within_its_bound():
    """NEFTune: uniform noise of at most alpha / sqrt(tokens x width) on each input embedding,
    fresh every pass, and none once the model is in eval mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from llm_planner.tuning.train import add_embedding_noise

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2))
    embed = model.get_input_embeddings()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8]])
    clean = embed(ids).detach()
    handle = add_embedding_noise(model, alpha=5.0)
    model.train()
    first, second = embed(ids).detach(), embed(ids).detach()
    bound = 5.0 / (8 * 32) ** 0.5
    assert 0.5 * bound < float((first - clean).abs().max()) <= bound
    assert not torch.equal(first, second)
    model.eval()
    assert torch.equal(embed(ids), clean)
    handle.remove()
    model.train()
    assert torch.equal(embed(ids), clean)


@pytest.mark.slow
def test_tuning_further_starts_from_the_given_adapters_weights(tmp_path, rows):
    """One step at learning rate 0 changes nothing, so an adapter tuned further that way keeps
    the weights it started from, while a fresh adapter starts elsewhere (LoRA B at zero)."""
    from safetensors.torch import load_file

    from llm_planner.engine.models import prepare_default_model
    from llm_planner.tuning.train import TuneSettings, tune

    base, some = prepare_default_model(), [r for r in rows if r.split == "tune"][:2]
    quiet = lambda _line: None  # noqa: E731
    tune(base, some, tmp_path / "first", TuneSettings(epochs=1, batch_size=2), log=quiet)
    still = TuneSettings(epochs=1, batch_size=2, learning_rate=0.0)
    tune(base, some, tmp_path / "further", still, log=quiet, start_from=tmp_path / "first", corpora=("a.jsonl",))
    tune(base, some, tmp_path / "fresh", still, log=quiet)
    first, further, fresh = (load_file(str(tmp_path / d / "adapter_model.safetensors"))
                             for d in ("first", "further", "fresh"))
    assert first.keys() == further.keys() == fresh.keys()
    assert all(first[k].equal(further[k]) for k in first)
    assert not all(first[k].equal(fresh[k]) for k in first)
    recorded = json.loads((tmp_path / "further" / "training.json").read_text())
    assert recorded["started_from"] == str(tmp_path / "first") and recorded["corpora"] == ["a.jsonl"]
    with pytest.raises(ValueError, match="not an adapter of this base model, rank"):
        tune(base, some, tmp_path / "other", TuneSettings(rank=4, alpha=8), log=quiet, start_from=tmp_path / "first")


def test_tune_model_reads_every_corpus_it_is_given(tmp_path):
    """Repeated --corpus options tune on all their tuning rows; with none among them, the
    error names every file (before any model is loaded)."""
    import argparse

    from llm_planner.commands.tuning import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    held = [json.dumps({**json.loads(line), "split": "heldout"}) for line in CORPUS.read_text().splitlines()[:2]]
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for file, line in zip(files, held):
        file.write_text(line + "\n")
    args = parser.parse_args(["tune-model", "--corpus", str(files[0]), "--corpus", str(files[1])])
    assert args.corpus == [str(f) for f in files]
    with pytest.raises(ValueError, match=f"{files[0]}, {files[1]}: no rows of the tuning split"):
        args.func(args)


def test_a_quick_try_tunes_on_rows_drawn_across_the_templates(tmp_path, monkeypatch):
    """--limit N draws N tuning rows at random with the seed, not the first N of the file
    (a corpus lists its rows template by template)."""
    import argparse

    import llm_planner.engine.models as models
    import llm_planner.tuning.train as train
    from llm_planner.commands.tuning import add_parser

    drawn = []

    def tune(base, rows, out, settings, **kwargs):
        drawn.append([r.id for r in rows])
        return {"steps": 1, "tokens": 1, "minutes": 0.0, "final_loss": 0.0}

    monkeypatch.setattr(train, "tune", tune)
    monkeypatch.setattr(models, "prepare_tuned_model", lambda adapter, target, base: target)
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    (tmp_path / "config.json").write_text("{}")
    tuning = [r for r in load_corpus(CORPUS) if r.split == "tune"]

    def try_with(*options):
        argv = ["tune-model", "--base-model", str(tmp_path), "-o", str(tmp_path / "a"), "--limit", "40", *options]
        args = parser.parse_args(argv)
        assert args.func(args) == 0
        return drawn[-1]

    first = try_with()
    assert len(first) == 40 and len(set(first)) == 40
    templates = {r.id: r.template for r in tuning}
    assert len({templates[t] for t in first}) > len({r.template for r in tuning[:40]})
    assert try_with() == first  # the same seed draws the same rows
    assert try_with("--seed", "1") != first
    with pytest.raises(ValueError, match="--limit 0: give at least 1 row"):
        args = parser.parse_args(
            ["tune-model", "--base-model", str(tmp_path), "-o", str(tmp_path / "a"), "--limit", "0"])
        args.func(args)
    with pytest.raises(ValueError, match="--embedding-noise -1.0: give 0"):
        try_with("--embedding-noise", "-1")


def test_another_base_model_is_tuned_into_a_folder_of_its_own(tmp_path):
    """--base-model takes a model folder; the bundled adapter stays the bundled base model's."""
    import argparse

    from llm_planner.commands.tuning import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    (tmp_path / "config.json").write_text("{}")
    args = parser.parse_args(["tune-model", "--base-model", str(tmp_path)])
    with pytest.raises(ValueError, match="--base-model: give -o"):
        args.func(args)
    args = parser.parse_args(["tune-model", "--base-model", str(tmp_path / "nowhere"), "-o", str(tmp_path / "a")])
    with pytest.raises(FileNotFoundError, match="not a Hugging Face model folder"):
        args.func(args)


def test_tune_model_tunes_and_merges_onto_the_base_model_it_is_given(tmp_path, monkeypatch):
    import argparse

    import llm_planner.engine.models as models
    import llm_planner.tuning.train as train
    from llm_planner.commands.tuning import add_parser

    seen = {}

    def tune(base, rows, out, settings, **kwargs):
        seen["tuned"] = base
        return {"steps": 1, "tokens": 1, "minutes": 0.0, "final_loss": 0.0}

    def merge(adapter, target, base):
        seen["merged"] = base
        return target

    monkeypatch.setattr(train, "tune", tune)
    monkeypatch.setattr(models, "prepare_tuned_model", merge)
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    (tmp_path / "config.json").write_text("{}")
    args = parser.parse_args(["tune-model", "--base-model", str(tmp_path), "-o", str(tmp_path / "a"), "--limit", "2"])
    assert args.func(args) == 0
    assert seen == {"tuned": tmp_path, "merged": tmp_path}


class _ChatTokenizer:
    """A tokenizer's chat template, as text, and its special tokens' ids."""

    def __init__(self, turn: str, end: str, tokens: list[str]):
        self.turn, self.end, self.tokens = turn, end, tokens

    def apply_chat_template(self, chat, tokenize):
        return "".join(self.turn.format(m["role"], m["content"]) + self.end for m in chat)

    def convert_tokens_to_ids(self, token):
        return self.tokens.index(token)


def test_an_answer_ends_at_the_token_the_base_models_template_writes():
    from llm_planner.tuning.train import end_of_turn

    smollm2 = _ChatTokenizer("<|im_start|>{}\n{}", "<|im_end|>\n", ["<|im_start|>", "<|im_end|>"])
    gemma = _ChatTokenizer("<start_of_turn>{}\n{}", "<end_of_turn>\n", ["<|im_end|>", "<bos>", "<end_of_turn>"])
    assert end_of_turn(smollm2) == 1
    assert end_of_turn(gemma) == 2  # the one its template writes, though both are known
    with pytest.raises(ValueError, match="ends an answer with none of"):
        end_of_turn(_ChatTokenizer("<s>{}: {}", "</s>", ["<s>", "</s>"]))


def test_averaged_adapters_hold_the_mean_of_each_weight_and_say_where_it_came_from(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    from llm_planner.tuning.average import average_adapters

    def adapter(name: str, a: float, b: float, rows: int = 2) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        weights = {"lora_A": torch.full((rows, 3), a, dtype=torch.bfloat16), "lora_B": torch.full((3, rows), b)}
        save_file(weights, str(folder / "adapter_model.safetensors"))
        (folder / "adapter_config.json").write_text(json.dumps({"r": rows}))
        (folder / "training.json").write_text(json.dumps({"base_model": "m", "skill_sets": [name]}))
        return folder

    one, two = adapter("python_arm", 1.0, -2.0), adapter("minispec_arm", 3.0, 4.0)
    recorded = average_adapters([one, two], tmp_path / "mean")
    mean = load_file(str(tmp_path / "mean" / "adapter_model.safetensors"))
    assert mean["lora_A"].dtype == torch.bfloat16 and mean["lora_A"].eq(2.0).all() and mean["lora_B"].eq(1.0).all()
    assert recorded["averaged"] == [str(one), str(two)] and recorded["skill_sets"] == ["minispec_arm", "python_arm"]
    assert json.loads((tmp_path / "mean" / "adapter_config.json").read_text()) == {"r": 2}
    with pytest.raises(ValueError, match="same base model, rank"):
        average_adapters([one, adapter("other", 0.0, 0.0, rows=4)], tmp_path / "bad")
    with pytest.raises(ValueError, match="two adapters or more"):
        average_adapters([one], tmp_path / "bad")
