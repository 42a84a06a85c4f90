import numpy as np
import pytest

from llm_planner.catalog.exec_model import fit_exec_model, load_exec_model, read_samples_csv


def call(skill_set, text):
    (c,) = skill_set.find_calls(text)
    return c


def test_tello_profile(drone):
    m = load_exec_model("tello")
    mf = call(drone, "mf(50)")
    assert m.estimate(mf, "mean") == pytest.approx(1.8144 + 0.0072 * 50)
    assert m.estimate(mf, "min") == pytest.approx(0.9 * (1.8144 + 0.36))
    assert m.estimate(call(drone, "mu(100)"), "mean") == pytest.approx(8e-7 * 1e6 - 0.0003 * 1e4 + 3.88 + 1.3195)
    assert m.estimate(call(drone, "d(2.5)"), "mean") == pytest.approx(2.5)
    scan = call(drone, "s('cup')")
    assert m.estimate(scan, "min") == pytest.approx(1.5275)
    assert m.estimate(scan, "max") == pytest.approx(12.22)
    assert m.estimate(call(drone, "l('hi')"), "mean") == pytest.approx(0.001)


def test_sampling_stays_in_the_model_range(drone):
    m = load_exec_model("tello")
    rng = np.random.default_rng(0)
    scan = [m.sample(call(drone, "s('x')"), rng) for _ in range(200)]
    assert set(np.round(scan, 4)) <= {round(k * 1.5275, 4) for k in range(1, 9)}
    mf = [m.sample(call(drone, "mf(100)"), rng) for _ in range(200)]
    base = 1.8144 + 0.72
    assert min(mf) >= 0.9 * base - 1e-9 and max(mf) <= 1.1 * base + 1e-9
    assert np.std(mf) > 0


def test_uniform_arm_model():
    from llm_planner.catalog.skills import load_skill_set

    arm = load_skill_set("minispec_arm")
    m = load_exec_model("indy7")
    g = call(arm, "g('cup')")
    assert (m.estimate(g, "min"), m.estimate(g, "mean"), m.estimate(g, "q50")) == pytest.approx((0.8, 3.15, 3.15))


def test_unknown_statistic(drone):
    with pytest.raises(ValueError):
        load_exec_model("tello").estimate(call(drone, "tp()"), "median")


def test_fit_recovers_a_linear_model(drone, tmp_path):
    rng = np.random.default_rng(1)
    rows = ["skill,arg,seconds"]
    for v in rng.integers(20, 300, 60):
        rows.append(f"mf,{v},{0.5 + 0.01 * v + rng.normal(0, 0.01):.4f}")
    rows += ["g,,2.0", "g,,3.0", "tp,,0.2"]
    csv = tmp_path / "samples.csv"
    csv.write_text("\n".join(rows) + "\n")
    fitted = fit_exec_model(load_exec_model("tello"), read_samples_csv(csv))
    mf = fitted.model_for("mf")
    assert mf.kind == "poly"
    assert mf.coeffs[0] == pytest.approx(0.5, abs=0.02) and mf.coeffs[1] == pytest.approx(0.01, abs=2e-4)
    assert fitted.model_for("g").kind == "empirical" and fitted.model_for("g").samples == [2.0, 3.0]
    assert fitted.model_for("tp").kind == "const" and fitted.model_for("tp").value == 0.2
    assert fitted.model_for("tc") == load_exec_model("tello").model_for("tc")  # untouched skills kept
    assert "Refitted from 63" in fitted.spec.source


def test_bad_samples_are_reported(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("skill,arg,seconds\nmf,50,-1\n")
    with pytest.raises(ValueError, match=":2:"):
        read_samples_csv(bad)
    bad.write_text("name,seconds\nmf,1\n")
    with pytest.raises(ValueError, match="missing columns"):
        read_samples_csv(bad)


def test_samples_written_by_the_fleet_are_read_back_per_robot_type(tmp_path):
    from llm_planner.catalog.exec_model import write_samples_csv

    path = tmp_path / "calls.csv"
    rows = [("tello", "mf", 50.0, 2.1), ("indy7", "g", None, 3.0), ("tello", "tp", None, 0.001)]
    assert write_samples_csv(path, rows) == 3
    tello = read_samples_csv(path, "tello")
    assert [(s.skill, s.arg, s.seconds) for s in tello] == [("mf", 50.0, 2.1), ("tp", None, 0.001)]
    assert len(read_samples_csv(path)) == 3


def test_a_simulated_live_robot_draws_the_times_of_a_simulated_run(drone):
    """Live and simulated runs of a workload give a task's calls the same
    times (per task, in plan order, from the seed), whatever else the robot ran in between."""
    from llm_planner.dispatch.robot_port import CallTimeSource
    from llm_planner.domain.tasks import DispatchedSegment
    from llm_planner.robots.backends import SimBackend

    model = load_exec_model("tello")
    plan = drone.find_calls("mf(50);s('cup');tc(90);mu(80);")
    segments = [DispatchedSegment(i, c.text, [c], [1], i == len(plan) - 1, 0.0) for i, c in enumerate(plan)]
    source = CallTimeSource(seed=3)
    simulated = [t for seg in segments for t in source.times("job7", seg, model)]
    robot = SimBackend(model, seed=3)
    live = []
    for c in plan:
        robot.draw_s(c, "job9")  # another task's call in between changes nothing
        live.append(robot.draw_s(c, "job7"))
    assert live == simulated
    assert SimBackend(model, seed=4).draw_s(plan[0], "job7") != simulated[0]
