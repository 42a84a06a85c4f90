"""The `tello` backend through the real djitellopy over UDP on loopback, against the SDK
emulator (no drone, no mocked djitellopy)."""

import threading

import pytest

from llm_planner.catalog.skills import load_skill_set
from llm_planner.robots.backends import TelloBackend
from llm_planner.robots.tello_emulator import TelloEmulator
from llm_planner.settings.paths import data_path


@pytest.fixture(scope="module")
def drone():
    emulator = TelloEmulator(time_scale=0.01).start()
    backend = TelloBackend(host="127.0.0.1", port=emulator.port, scene=data_path("config", "scenes", "office.yaml"))
    yield emulator, backend
    backend.close()
    emulator.stop()


def run(backend, text):
    skills = load_skill_set("minispec_drone")
    return [backend.execute(call, threading.Event()) for call in skills.find_calls(text)]


def test_connect_and_takeoff(drone):
    emulator, _ = drone
    assert emulator.commands[:2] == ["command", "takeoff"] and emulator.flying


def test_movement_maps_to_sdk_commands(drone):
    emulator, backend = drone
    before = len(emulator.commands)
    results = run(backend, "mf(50);mb(30);ml(600);mu(80);tc(90);tu(45);d(0.01);")
    assert all(r.success for r in results), [r.message for r in results]
    assert emulator.commands[before:] == ["forward 50", "back 30", "left 500", "up 80", "cw 90", "ccw 45"]
    assert results[0].seconds >= 0.01 * (1.8144 + 0.36) * 0.9  # the emulated drone's own timing


def test_perception_from_the_scene_and_goto(drone):
    emulator, backend = drone
    backend.heading_turns = 0
    before = len(emulator.commands)
    results = run(backend, "iv('person');od('person');s('bottle');g('bottle');iv('person')")
    assert [r.value for r in results] == [True, 150, True, None, False]
    assert emulator.commands[before:] == ["cw 45", "cw 45", "forward 90"]


def test_failures_are_reported(drone):
    emulator, backend = drone
    results = run(backend, "g('unicorn');s('unicorn')")
    assert not results[0].success and "not in view" in results[0].message
    assert not results[1].success and "not found" in results[1].message


def test_a_drone_stopped_by_an_obstacle_fails_the_call_with_its_answer():
    # an address of its own: djitellopy tells drones apart by IP
    emulator = TelloEmulator(host="127.0.0.3", time_scale=0.01, fail_on=r"^forward").start()
    backend = TelloBackend(host="127.0.0.3", port=emulator.port, connect_timeout_s=1.0)
    try:
        results = run(backend, "mu(50);mf(50);tc(90)")
        assert results[0].success and results[2].success
        assert not results[1].success and results[1].message.startswith("mf(50):")
        assert "Obstacle detected" in results[1].message
    finally:
        backend.close()
        emulator.stop()


@pytest.mark.ros
def test_a_plan_flown_through_the_fleet_over_ros():
    from ros_fixtures import instruction, start_fleet

    from llm_planner.settings.fleet import RobotConfig

    # a second loopback address: djitellopy tells drones apart by IP
    emulator = TelloEmulator(host="127.0.0.2", time_scale=0.01).start()
    running = start_fleet([RobotConfig(id="tello1", type="tello", backend="tello",
                                       options={"host": "127.0.0.2", "port": emulator.port})])
    try:
        c = running.client
        c.publish("fly", "tello1", instruction(3))  # mu(80);mf(100);mb(100);md(80);
        assert c.wait_terminal(["fly"], timeout=60)
        assert c.terminal("fly").state == c.terminal("fly").SUCCEEDED, c.terminal("fly").message
        assert emulator.commands[-4:] == ["up 80", "forward 100", "back 100", "down 80"]
    finally:
        running.stop()
        emulator.stop()
    assert emulator.commands[-1] == "land"  # the backend lands the drone when the robot stops
