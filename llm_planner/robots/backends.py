"""How a robot executes skill calls (no ROS here; the action servers wrap these).

A backend executes one call at a time and blocks for its duration; `cancel` is set when the
goal is canceled and must end the call early; `task_id` names the task the call belongs to.

- SimBackend (`sim`): waits the exec model's sampled time in real time (optionally scaled),
  drawn as a simulated run draws it (per task, in plan order, from the robot's seed), with
  fault drills: `fail_on` (regex: matching calls fail), `fail_rate` (a failure probability
  per skill, drawn as a simulated run draws it: catalog/faults.py) and `stall_on` (regex:
  matching calls never finish, to exercise the planner's robot timeout).
- TelloBackend (`tello`): a DJI Tello through djitellopy's SDK commands. Movement and turns
  map to SDK commands; perception calls are answered from a configurable scene file.
- A real arm: implement `SkillBackend.execute` for its driver and register it in
  BACKENDS (docs/ros.md, "The fleet file").
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import yaml

from llm_planner.catalog.exec_model import ExecModel, TaskGenerators
from llm_planner.catalog.faults import CallFaults, failure_message, parse_fail_rates
from llm_planner.domain.calls import SkillCall


@dataclass
class CallResult:
    success: bool
    seconds: float
    message: str = ""
    value: object = None


class SkillBackend(Protocol):
    def execute(self, call: SkillCall, cancel: threading.Event, task_id: str = "") -> CallResult: ...

    def close(self) -> None: ...


class SimBackend:
    """Simulated robot in real time: each call takes a time drawn from the exec model, from
    the task's own generator (catalog/exec_model.py `task_rng`): the same times as the
    task's calls get in a simulated run with the same seed, so live and simulated runs of a
    workload differ only by the planner and the middleware."""

    RECENT_TASKS = 16  # a robot runs one task's plan at a time; a few generators are enough

    def __init__(
        self,
        model: ExecModel,
        seed: int = 0,
        time_scale: float = 1.0,
        fail_on: str | None = None,
        stall_on: str | None = None,
        fail_rate: str | float | dict | None = None,
    ) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be > 0")
        self.model = model
        self.seed = seed
        self._task_rngs = TaskGenerators(seed, keep=self.RECENT_TASKS)
        self.time_scale = time_scale
        self.fail_on = re.compile(fail_on) if fail_on else None
        self.stall_on = re.compile(stall_on) if stall_on else None
        self.faults = CallFaults(parse_fail_rates(fail_rate), seed, keep=self.RECENT_TASKS)

    def draw_s(self, call: SkillCall, task_id: str) -> float:
        """The call's simulated duration (before time_scale): the task's next draw."""
        return self.model.sample(call, self._task_rngs(task_id))

    def execute(self, call: SkillCall, cancel: threading.Event, task_id: str = "") -> CallResult:
        start = time.monotonic()
        if self.stall_on and self.stall_on.search(call.text):
            cancel.wait()
            return CallResult(False, time.monotonic() - start, "canceled")
        duration = self.draw_s(call, task_id) * self.time_scale
        if cancel.wait(duration):
            return CallResult(False, time.monotonic() - start, "canceled")
        if (self.fail_on and self.fail_on.search(call.text)) or self.faults.fails(task_id, call):
            return CallResult(False, time.monotonic() - start, failure_message(call))
        return CallResult(True, time.monotonic() - start)

    def close(self) -> None:
        pass


@dataclass
class SceneObject:
    turns: int = 0  # 45-degree clockwise turns until it is in view (0: visible now)
    x: float = 0.5
    y: float = 0.5
    w: float = 0.2
    h: float = 0.2
    distance_cm: float = 100.0


@dataclass
class Scene:
    """What the drone 'sees', for perception calls (Tello has no on-board detector here)."""

    objects: dict[str, SceneObject] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path | None) -> Scene:
        if not path:
            return cls()
        raw = yaml.safe_load(Path(path).read_text()) or {}
        return cls({name: SceneObject(**(spec or {})) for name, spec in (raw.get("objects") or {}).items()})


_ARG = re.compile(r"\((.*)\)", re.S)


def _string_arg(call: SkillCall) -> str:
    match = _ARG.search(call.text)
    return match.group(1).strip().strip("'\"") if match else ""


class TelloBackend:
    """MiniSpec calls on a DJI Tello via djitellopy.

    mf/mb/ml/mr/mu/md(cm) -> forward/back/left/right/up/down (20..500 cm, clamped);
    tc/tu(deg) -> cw/ccw (1..360); d(s) -> wait; g(obj) -> fly forward to ~30 cm before the
    scene object's distance; s(obj) -> cw 45 until the scene object comes into view (fails
    after 8 turns); iv/ox/oy/ow/oh/od/p answered from the scene; tp/l/rp/t/sa -> logged.
    Options: host, port (the SDK's UDP control port), takeoff (take off on connect), scene.
    """

    def __init__(
        self,
        host: str = "192.168.10.1",
        port: int = 8889,
        takeoff: bool = True,
        scene: str | Path | None = None,
        connect_timeout_s: float = 7.0,
    ) -> None:
        from djitellopy import Tello

        self.scene = Scene.load(scene)
        self.tello = Tello(host=host)
        self.tello.address = (host, int(port))  # the SDK's control port, configurable for emulators
        self.tello.RESPONSE_TIMEOUT = connect_timeout_s
        self.tello.connect()
        self.heading_turns = 0
        if takeoff:
            self.tello.takeoff()
        self.log: list[str] = []

    def _visible(self, name: str) -> SceneObject | None:
        obj = self.scene.objects.get(name)
        return obj if obj is not None and obj.turns == self.heading_turns % 8 else None

    def execute(self, call: SkillCall, cancel: threading.Event, task_id: str = "") -> CallResult:
        from djitellopy import TelloException

        start = time.monotonic()
        value = None
        try:
            value = self._execute(call, cancel)
        except TelloException as exc:
            return CallResult(False, time.monotonic() - start, f"{call.text}: {exc}")
        except _CallFailed as exc:
            return CallResult(False, time.monotonic() - start, f"{call.text}: {exc}")
        return CallResult(True, time.monotonic() - start, value=value)

    def _execute(self, call: SkillCall, cancel: threading.Event):
        t, skill = self.tello, call.skill
        moves = {
            "mf": t.move_forward,
            "mb": t.move_back,
            "ml": t.move_left,
            "mr": t.move_right,
            "mu": t.move_up,
            "md": t.move_down,
        }
        if skill in moves:
            moves[skill](int(min(500, max(20, abs(call.number or 20)))))
            return None
        if skill in ("tc", "tu"):
            degrees = int(min(360, max(1, abs(call.number or 90))))
            (t.rotate_clockwise if skill == "tc" else t.rotate_counter_clockwise)(degrees)
            self.heading_turns += (1 if skill == "tc" else -1) * round(degrees / 45)
            return None
        if skill == "d":
            if cancel.wait(max(0.0, call.number or 0.0)):
                raise _CallFailed("canceled")
            return None
        name = _string_arg(call)
        if skill == "s":
            for _ in range(8):
                if self._visible(name):
                    return True
                if cancel.is_set():
                    raise _CallFailed("canceled")
                t.rotate_clockwise(45)
                self.heading_turns += 1
            raise _CallFailed(f"{name!r} not found after a full turn")
        if skill == "g":
            obj = self._visible(name)
            if obj is None:
                raise _CallFailed(f"{name!r} is not in view")
            distance = obj.distance_cm - 30
            if distance >= 20:
                t.move_forward(int(min(500, distance)))
            return None
        if skill == "iv":
            return self._visible(name) is not None
        if skill in ("ox", "oy", "ow", "oh", "od"):
            obj = self._visible(name)
            if obj is None:
                raise _CallFailed(f"{name!r} is not in view")
            return {"ox": obj.x, "oy": obj.y, "ow": obj.w, "oh": obj.h, "od": obj.distance_cm}[skill]
        self.log.append(call.text)  # tp, l, p, rp, t, sa: no flight command
        return None

    def close(self) -> None:
        self.tello.end()  # lands if flying


class _CallFailed(Exception):
    pass


def make_backend(kind: str, model: ExecModel, options: dict) -> SkillBackend:
    options = dict(options)
    if kind == "sim":
        allowed = {"seed", "time_scale", "fail_on", "stall_on", "fail_rate"}
        unknown = set(options) - allowed
        if unknown:
            raise ValueError(f"sim backend: unknown options {sorted(unknown)} (allowed: {sorted(allowed)})")
        return SimBackend(model, **options)
    if kind == "tello":
        allowed = {"host", "port", "takeoff", "scene", "connect_timeout_s"}
        unknown = set(options) - allowed
        if unknown:
            raise ValueError(f"tello backend: unknown options {sorted(unknown)} (allowed: {sorted(allowed)})")
        return TelloBackend(**options)
    raise ValueError(f"unknown robot backend {kind!r}")
