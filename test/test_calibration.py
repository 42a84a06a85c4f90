"""The correction measured iterations make to a profile's step predictions."""

import pytest

from llm_planner.engine.calibration import (
    MIN_BATCH_SAMPLES,
    MIN_OWN_SAMPLES,
    MIN_SAMPLES,
    WINDOW,
    StepCalibration,
    StepCorrection,
)
from llm_planner.engine.profile import load_engine_profile


@pytest.fixture
def profile():
    return load_engine_profile("smollm2-135m-instruct-float32-cpu-avx2")


def decode_iterations(calibration, profile, error_s, n, batch=3, context=900):
    for _ in range(n):
        calibration.observe(batch, context, 0, 0, profile.predict_step_s(batch, context) + error_s)


def test_no_correction_until_enough_iterations_were_measured(profile):
    calibration = StepCalibration(profile)
    decode_iterations(calibration, profile, 0.03, MIN_SAMPLES - 1)
    assert calibration.correction == StepCorrection()
    decode_iterations(calibration, profile, 0.03, 1)
    assert calibration.correction.decode_offset_s == pytest.approx(0.03)


def test_decode_iterations_shift_every_prediction_by_the_same_offset(profile):
    calibration = StepCalibration(profile)
    decode_iterations(calibration, profile, 0.03, MIN_SAMPLES)
    correction = calibration.correction
    for batch, context in ((1, 100), (4, 1200), (12, 4000)):
        assert correction.predict_step_s(profile, batch, context) == pytest.approx(
            profile.predict_step_s(batch, context) + 0.03)


def test_prefill_and_resumes_are_scaled_by_what_they_were_measured_to_add(profile):
    calibration = StepCalibration(profile)
    decode_iterations(calibration, profile, 0.03, MIN_SAMPLES)
    for _ in range(MIN_SAMPLES):
        decode = profile.step_s(3, 900) + 0.03
        extra = profile.step_s(3, 900, 40, 1) - profile.step_s(3, 900)
        calibration.observe(3, 900, 40, 1, decode + 1.5 * extra)
    correction = calibration.correction
    assert correction.extra_factor == pytest.approx(1.5)
    decode = profile.predict_step_s(2, 500)
    extra = profile.predict_step_s(2, 500, 100, 2) - decode
    assert correction.predict_step_s(profile, 2, 500, 100, 2) == pytest.approx(decode + 0.03 + 1.5 * extra)


def test_a_stray_slow_iteration_moves_nothing_and_a_lasting_change_is_followed(profile):
    calibration = StepCalibration(profile)
    decode_iterations(calibration, profile, 0.02, MIN_SAMPLES)
    decode_iterations(calibration, profile, 1.0, 1)
    assert calibration.correction.decode_offset_s == pytest.approx(0.02)
    decode_iterations(calibration, profile, 0.05, WINDOW)
    assert calibration.correction.decode_offset_s == pytest.approx(0.05)


def test_a_faster_engine_than_profiled_lowers_predictions_but_never_below_half_the_decode_base(profile):
    calibration = StepCalibration(profile)
    decode_iterations(calibration, profile, -0.01, MIN_SAMPLES)
    assert calibration.correction.decode_offset_s == pytest.approx(-0.01)
    decode_iterations(calibration, profile, -10.0, WINDOW)
    assert calibration.correction.decode_offset_s == pytest.approx(-0.5 * profile.decode_base_s)
    assert calibration.correction.predict_step_s(profile, 1, 0) > 0


def test_the_prefill_factor_stays_within_its_range(profile):
    calibration = StepCalibration(profile)
    for _ in range(MIN_SAMPLES):
        calibration.observe(1, 100, 500, 0, 100.0)
    assert calibration.correction.extra_factor == 4.0


def test_an_idle_engine_is_predicted_to_take_no_time_whatever_the_correction(profile):
    assert StepCorrection(0.03, 2.0).predict_step_s(profile, 0, 0) == 0.0


def test_a_flatter_engine_than_profiled_is_predicted_flatter_at_every_batch_size(profile):
    # the engine takes 10 ms more than the profile's batch of one at every batch size
    measured = profile.predict_step_s(1, 100) + 0.010
    calibration = StepCalibration(profile)
    for _ in range(MIN_SAMPLES):
        for batch in (1, 2, 4):
            calibration.observe(batch, 100 * batch, 0, 0, measured)
    correction = calibration.correction
    assert correction.decode_s_per_seq < -0.5 * profile.decode_s_per_seq
    one, four = (correction.predict_step_s(profile, batch, 100 * batch) for batch in (1, 4))
    assert one == pytest.approx(measured, abs=0.002)
    assert four - one < 0.5 * (profile.predict_step_s(4, 400) - profile.predict_step_s(1, 100))


def test_past_the_batch_sizes_measured_a_further_sequence_never_makes_an_iteration_cheaper(profile):
    calibration = StepCalibration(profile)
    for _ in range(MIN_SAMPLES):
        for batch in (1, 2):
            calibration.observe(batch, 0, 0, 0, profile.predict_step_s(batch, 0) + (0.05 if batch == 1 else 0.0))
    correction = calibration.correction
    assert correction.decode_s_per_seq == pytest.approx(-profile.decode_s_per_seq)
    assert correction.predict_step_s(profile, 6, 0) >= correction.predict_step_s(profile, 1, 0)


def measured_by_batch(calibration, profile, errors, n):
    for _ in range(n):
        for batch, error in errors.items():
            calibration.observe(batch, 100 * batch, 0, 0, profile.predict_step_s(batch, 100 * batch) + error)


def test_a_batch_size_measured_dearer_than_its_neighbours_is_predicted_at_its_own_cost(profile):
    # two sequences cost 5 ms more than one or three: a line through the three would put two
    # between them, and suspending the third generation would look like a gain
    errors = {1: 0.010, 2: 0.015 - profile.decode_s_per_seq, 3: 0.010 - 2 * profile.decode_s_per_seq}
    calibration = StepCalibration(profile)
    measured_by_batch(calibration, profile, errors, MIN_OWN_SAMPLES)
    correction = calibration.correction
    one, two, three = (correction.predict_step_s(profile, b, 100 * b) for b in (1, 2, 3))
    for batch, error in errors.items():
        assert correction.predict_step_s(profile, batch, 100 * batch) == pytest.approx(
            profile.predict_step_s(batch, 100 * batch) + error)
    assert two > three and two > one
    line = correction.decode_offset_s + 3 * correction.decode_s_per_seq  # batch 4 was never measured
    assert correction.predict_step_s(profile, 4, 400) == pytest.approx(
        profile.predict_step_s(4, 400) + max(line, *errors.values()))
    assert correction.predict_step_s(profile, 4, 400) > two
    assert "batch 2 +" in correction.describe()


def test_a_batch_size_seen_a_few_times_is_priced_on_the_line(profile):
    calibration = StepCalibration(profile)
    measured_by_batch(calibration, profile, {1: 0.010, 3: 0.010}, MIN_OWN_SAMPLES)
    measured_by_batch(calibration, profile, {2: 0.030}, MIN_OWN_SAMPLES - 1)
    correction = calibration.correction
    line = correction.decode_offset_s + correction.decode_s_per_seq
    assert correction.predict_step_s(profile, 2, 200) == pytest.approx(profile.predict_step_s(2, 200) + line)
    measured_by_batch(calibration, profile, {2: 0.030}, 1)
    assert calibration.correction.predict_step_s(profile, 2, 200) == pytest.approx(
        profile.predict_step_s(2, 200) + 0.030)


def test_the_slope_waits_for_two_batch_sizes_seen_often_enough(profile):
    calibration = StepCalibration(profile)
    decode_iterations(calibration, profile, 0.03, MIN_SAMPLES, batch=3)
    for _ in range(MIN_BATCH_SAMPLES - 1):
        calibration.observe(1, 0, 0, 0, profile.predict_step_s(1, 0) + 0.06)
    assert calibration.correction.decode_s_per_seq == 0.0
    assert calibration.correction.decode_offset_s == pytest.approx(0.03)
    calibration.observe(1, 0, 0, 0, profile.predict_step_s(1, 0) + 0.06)
    assert calibration.correction.decode_s_per_seq < 0.0
