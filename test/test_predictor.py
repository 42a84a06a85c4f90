"""The plan length predictor: task features, training, the checkpoint, online refinement."""

import random

import pytest

pytest.importorskip("torch")

from llm_planner.predictor.dataset import PlanSample, read_samples, write_samples
from llm_planner.predictor.evaluate import RESULT_KEYS, evaluate, train_predictor
from llm_planner.predictor.features import task_features
from llm_planner.predictor.predict import (
    LengthPrediction,
    LengthPredictor,
    conditional_mean,
)


def test_features_count_what_makes_plans_long():
    one = task_features("Scene: [desk, cup]. Fly 50 cm forward.")
    many = task_features("Scene: [desk, cup]. Task: [A] 1) climb 50 cm. 2) turn left 90 degrees. "
                         "3) take a photo. 4) fly to the cup.")
    assert one.action_verbs == 1 and many.action_verbs == 4
    assert many.enumerated == 4 and one.enumerated == 0
    assert many.objects_named == 1 and many.scene_objects == 2
    assert task_features("ALERT: wall ahead. Scene: [wall]. Back off.").error_follow_up == 1.0
    assert task_features("Scene: [box]. Have a look around, then check on it.").vagueness >= 1
    assert task_features("Scene: [box]. Take photos in four directions.").repeat_count == 4
    assert task_features("Scene: [box]. Find the cup; if you see it, fly to it.").open_endedness >= 2


ACTIONS = ["fly 50 cm forward", "take a photo", "turn left 90 degrees", "climb 40 cm", "go to the desk"]


def synthetic(n: int, seed: int) -> list[PlanSample]:
    """Plans whose length follows the number of actions asked for (with noise), per skill set."""
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        steps = rng.randint(1, 6)
        text = "Scene: [desk, cup]. " + ", then ".join(rng.choice(ACTIONS) for _ in range(steps)) + "."
        skill_set = rng.choice(["minispec_drone", "python_arm"])
        per = 6 if skill_set == "minispec_drone" else 14
        segment_tokens = [per + rng.randint(-1, 1) for _ in range(steps)]
        samples.append(PlanSample(f"t{seed}-{i}", "", "tello", skill_set, text, sum(segment_tokens), steps,
                                  segment_tokens, True))
    return samples


@pytest.fixture(scope="module")
def trained():
    return train_predictor(synthetic(160, 0), "test-model", epochs=400)


def test_the_learned_model_beats_both_baselines_on_unseen_tasks(trained):
    result = evaluate(trained, synthetic(80, 1))
    assert set(RESULT_KEYS) <= set(result)
    assert result["mae_tokens"] < 0.6 * result["baseline_mean_mae_tokens"]
    assert result["mae_tokens"] < result["baseline_length_mae_tokens"]
    assert result["spearman_tokens"] > 0.8
    assert result["bucket_accuracy"] > 1 / result["buckets"] * 2  # well above chance
    assert result["mae_segments"] < 1.0


def test_a_prediction_has_an_interval_and_a_bucket_distribution(trained):
    p = trained.predict("minispec_drone", "Scene: [desk]. Fly 50 cm forward, then take a photo.")
    assert p.tokens_low < p.tokens < p.tokens_high
    assert sum(p.bucket_probs) == pytest.approx(1.0, abs=1e-5)
    assert p.latency_ms > 0  # measured; its figure is `llm-planner predictor eval`'s latency_ms_p50
    arm = trained.predict("python_arm", "Scene: [desk]. Fly 50 cm forward, then take a photo.")
    assert arm.tokens > p.tokens  # the skill set is a feature: Python plans are wordier


def test_the_checkpoint_round_trips(trained, tmp_path):
    trained.save(tmp_path / "p.pt")
    loaded = LengthPredictor.load(tmp_path / "p.pt")
    text = "Scene: [cup]. Climb 40 cm and take a photo."
    before = trained.predict("minispec_drone", text).tokens
    assert loaded.predict("minispec_drone", text).tokens == pytest.approx(before)
    assert loaded.model.model_name == "test-model" and loaded.model.skill_sets == ["minispec_drone", "python_arm"]
    assert (tmp_path / "p.pt").stat().st_size < 100_000


def test_online_refinement_conditions_on_what_was_generated():
    p = LengthPrediction(tokens=30, tokens_low=10, tokens_high=60, segments=5, bucket_probs=(0.25, 0.5, 0.25),
                         bucket_edges=(0.0, 20.0, 40.0, float("inf")))
    assert conditional_mean(p, 0) == pytest.approx(0.25 * 10 + 0.5 * 30 + 0.25 * 50)
    assert conditional_mean(p, 30) == pytest.approx((0.25 * 35 + 0.25 * 50) / 0.5)  # half of the middle bucket left
    assert conditional_mean(p, 100) > 100  # longer than predicted: still some to come
    predictor = LengthPredictor.__new__(LengthPredictor)
    fresh, later = predictor.remaining(p, 0, 0), predictor.remaining(p, 30, 3)
    assert fresh.tokens > later.tokens > 0
    assert later.next_segment_tokens == pytest.approx(0.5 * later.tokens / later.segments + 0.5 * 10)


def test_samples_round_trip_and_bad_lines_are_named(tmp_path):
    samples = synthetic(3, 2)
    write_samples(tmp_path / "s.jsonl", samples)
    assert read_samples(tmp_path / "s.jsonl") == samples
    (tmp_path / "bad.jsonl").write_text('{"task_id": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        read_samples(tmp_path / "bad.jsonl")


def test_the_planner_prices_segments_with_the_predictor(config, tokenizer):
    """`predictor: auto`: the committed checkpoint's estimates replace l_max; a workload runs to
    its end under timely and every estimate is dropped once its task ends."""
    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.lrtrace.composer import (
        compose_preset,
        load_preset,
        mean_exec_times,
        preset_traces,
    )
    from llm_planner.lrtrace.simulate import simulate
    from llm_planner.planning.segment_lengths import (
        FixedSegmentLengths,
        PredictedSegmentLengths,
        make_segment_lengths,
    )

    assert isinstance(make_segment_lengths(config), FixedSegmentLengths)
    predicted = config.model_copy(update={"predictor": "auto"})
    lengths = make_segment_lengths(predicted)
    assert isinstance(lengths, PredictedSegmentLengths) and lengths.at_current_batch
    drone = load_skill_set("minispec_drone")
    lengths.start("t", drone, "Scene: [desk]. Fly 50 cm forward, then take a photo.")
    ahead = lengths.ahead("t", drone, 0, 0)
    assert ahead[0] > 0 and ahead[0] != drone.segment_tokens
    assert len(ahead) >= 2  # a two-part task: more than one segment to come
    assert len(lengths.ahead("t", drone, 200, 9)) == 1  # far past the prediction: one more at most
    lengths.forget("t")
    assert lengths.ahead("t", drone, 0, 0) == [drone.segment_tokens]  # unknown task: l_max
    with pytest.raises(FileNotFoundError, match="predictor checkpoint"):
        make_segment_lengths(config.model_copy(update={"predictor": "missing.pt"}))

    preset = load_preset("wid1")
    traces = preset_traces(preset)
    workload = compose_preset(preset, 0, traces, mean_exec_times(traces, config.robot_types))
    workload = workload.model_copy(update={"jobs": workload.jobs[:60]})
    result = simulate(workload, traces, "timely", predicted, 0, tokenizer)
    assert len(result.records) == 60 and all(r.state.terminal for r in result.records)
    assert all(r.state.name == "SUCCEEDED" for r in result.records)


def test_rtlm_prices_plans_by_their_interval_and_offloads_the_huge_ones(trained, tmp_path):
    """What `rtlm` reads of the predictor: a plan's size between the median and the 90% bound,
    and whether it is above a training quantile."""
    from llm_planner.catalog.skills import load_skill_set
    from llm_planner.planning.segment_lengths import FixedSegmentLengths, PredictedSegmentLengths

    trained.save(tmp_path / "p.pt")
    lengths = PredictedSegmentLengths(tmp_path / "p.pt")
    drone, arm = load_skill_set("minispec_drone"), load_skill_set("python_arm")
    one, six = "Scene: [desk, cup]. Take a photo.", "Scene: [desk, cup]. " + ", then ".join(ACTIONS + ACTIONS[:1])
    lengths.start("one", drone, one)  # about 6 tokens: the shortest kind of training plan
    lengths.start("six", arm, six)  # about 84: the longest kind
    median, high = lengths.plan_size("one", 0.0), lengths.plan_size("one", 1.0)
    p = trained.predict("minispec_drone", one)
    assert median == pytest.approx(p.tokens) and high == pytest.approx(p.tokens_high) and median < high
    assert lengths.plan_size("six", 0.0) > 3 * median
    # a plan that has run past its predicted size is taken to go on as plans that long do
    assert lengths.plan_size("one", 1.0, generated=int(high) - 1) == high
    for generated in (int(high) + 1, 3 * int(high), 200):
        assert generated < lengths.plan_size("one", 1.0, generated) <= generated + 200
    assert trained.training_quantile(0.0) < trained.training_quantile(0.5) < trained.training_quantile(1.0)
    assert lengths.is_huge("six", 0.75) and not lengths.is_huge("one", 0.75)
    assert not lengths.is_huge("one", 0.05)
    fixed = FixedSegmentLengths()
    assert fixed.plan_size("one", 1.0) is None and not fixed.is_huge("one", 0.5)


def test_a_checkpoint_without_token_quantiles_says_to_train_again(trained):
    old = LengthPredictor(trained.model.__class__(**{**trained.model.__dict__, "info": {}}))
    with pytest.raises(ValueError, match="train it again"):
        old.training_quantile(0.9)


def test_training_with_no_epoch_to_keep_says_so():
    with pytest.raises(ValueError, match="no epoch of 0 gave a finite validation loss"):
        train_predictor(synthetic(40, 2), "test-model", epochs=0)
