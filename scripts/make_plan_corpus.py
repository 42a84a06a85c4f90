"""Write config/corpus/plan_tasks.jsonl: this project's corpus of robot instructions for the
plan benchmark (`llm-planner plans`) and the length predictor.

Each line is one task in the TimelyLLM artifact's field names (`robot_type`, `robot_system`,
`task_input`) plus `id`, `style` (`artifact`: `Scene: [name x:.. y:.. width:.. height:..],
Task: [A] ...` or `[E]` for an error follow-up; `project`: `Scene: [a, b]. ...`, `ALERT: ...`),
`kind` (single, multi, search, conditional, vague, error), `steps` (the actions the text asks
for, counted by its template) and `split`: `tune` (may inform prompts and grammars) or
`heldout` (a third, stratified by robot and style; never looked at while tuning).

Templates and word lists are written for this project; a seeded random generator fills them.
Re-running with the same seed writes the same file.
Usage: python scripts/make_plan_corpus.py [--seed 13] [--out config/corpus/plan_tasks.jsonl]"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

DRONE_THINGS = ["person", "chair", "desk", "laptop", "bottle", "cup", "door", "window", "plant", "shelf", "sofa",
                "dog", "ball", "table", "lamp", "backpack", "tv", "bicycle", "box", "book", "umbrella", "clock"]
ARM_ITEMS = ["apple", "banana", "orange", "pear", "bolt", "nut", "screw", "cup", "mug", "spoon", "fork",
             "red block", "blue block", "green block", "sponge", "marker", "lemon", "washer"]
ARM_PLACES = ["bin", "tray", "bowl", "basket", "box", "plate", "drawer"]
FRUIT = {"apple", "banana", "orange", "pear", "lemon"}
HARDWARE = {"bolt", "nut", "screw", "washer"}

# (robot_type, robot_system) as the artifact would name them; map_robot_type reads them.
ROBOTS = {"tello": ("drone", "tello minispec"), "indy7": ("robot arm", "indy7 minispec"),
          "fltrnn_arm": ("robot arm", "fltrnn python")}


class Drone:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.scene = rng.sample(DRONE_THINGS, rng.randint(3, 6))

    def thing(self) -> str:
        return self.rng.choice(self.scene)

    def clause(self) -> str:
        r = self.rng
        d, a, s = r.choice([20, 30, 40, 50, 60, 80, 100, 120, 150, 200]), r.choice([30, 45, 90, 180]), r.randint(1, 5)
        return r.choice([
            f"fly {d} cm forward", f"move forward {d} cm", f"go back {d} cm", f"fly {d} cm to the left",
            f"move right by {d} cm", f"climb {d} cm", f"go up {d} cm", f"descend {d} cm",
            f"turn right by {a} degrees", f"turn left {a} degrees", f"rotate {a} degrees clockwise",
            "take a photo", "take a picture", f"fly to the {self.thing()}", f"go to the {self.thing()}",
            f"hover for {s} seconds", f"wait {s} seconds", "report that you are done",
            f"take a photo of the {self.thing()}",
        ])

    def task(self, kind: str) -> tuple[str, int, bool]:
        """(instruction, steps, is_error)"""
        r = self.rng
        if kind == "single":
            return _sentence([self.clause()]), 1, False
        if kind == "multi":
            n = r.randint(2, 8)
            return _join(r, [self.clause() for _ in range(n)]), n, False
        o = r.choice(DRONE_THINGS)
        if kind == "search":
            return r.choice([
                (f"Find the {o}.", 1), (f"Find the {o} and fly to it.", 2),
                (f"Look for a {o}, fly to it and take a photo of it.", 3),
                (f"Search the room for the {o}; when you see it, tell me how far away it is.", 2),
                (f"Scan for a {o}, go to it, then climb 50 cm and take a picture.", 4),
            ]) + (False,)
        if kind == "conditional":
            return r.choice([
                (f"If you can see the {o}, fly to it; otherwise turn around.", 2),
                (f"Is there a {o}? If so, take a photo of it.", 2),
                (f"If the {o} is more than 100 cm away, fly 50 cm forward, then take a picture.", 3),
                (f"Check whether a {o} is in view. If it is, go to it and say hello; if not, report that it is "
                 "missing.", 3),
                (f"Turn right 90 degrees. If you see the {o} there, photograph it.", 3),
            ]) + (False,)
        if kind == "vague":
            return r.choice([
                ("Have a look around the room.", 4), (f"Check on the {o}.", 2),
                (f"Get a better view of the {o}.", 2), ("Make sure nobody is behind you.", 2),
                ("Show me what is on your left.", 2), ("Do a quick patrol and come back.", 4),
            ]) + (False,)
        d = r.choice([15, 20, 30, 40])
        return r.choice([
            (f"An obstacle is {d} cm ahead. Back off.", 1),
            (f"An obstacle is {d} cm ahead during mf(200). Get clear of it and continue over it.", 3),
            (f"A person is {d} cm from the propellers. Move to a safe distance.", 2),
            (f"The {o} was lost from view while flying to it. Find it again and continue.", 2),
            ("The battery is low. Descend 50 cm and report it.", 2),
            (f"The {o} moved while you were approaching it. Stop, find it and take a photo.", 3),
        ]) + (True,)


class Arm:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.items = rng.sample(ARM_ITEMS, rng.randint(2, 5))
        self.places = rng.sample(ARM_PLACES, rng.randint(1, 3))
        self.scene = self.items + self.places

    def task(self, kind: str) -> tuple[str, int, bool]:
        r = self.rng
        items, place = self.items, r.choice(self.places)
        a = items[0]
        b = items[1]
        if kind == "single":
            return r.choice([
                (f"Put the {a} in the {place}.", 1), (f"Pick up the {a}.", 1), (f"Move the {a} to the {place}.", 1),
                (f"Drop the {a} into the {place}.", 1), (f"Place the {a} on the {place}.", 1),
            ]) + (False,)
        if kind == "multi":
            n = r.randint(2, min(4, len(items)))
            chosen = items[:n]
            return r.choice([
                (f"Put {_list(chosen)} in the {place}.", n),
                (" Then, ".join(f"pick up the {x} and drop it in the {place}." for x in chosen).capitalize(), 2 * n),
                (f"Pick up the {a}, put it in the {place}, then wait 2 seconds and put the {b} in the {place}.", 3),
                (f"Stack the {b} on the {a}.", 2), (f"Move the {a} to the {place} and the {b} next to the {a}.", 2),
                (f"Say 'start', put {_list(chosen)} in the {place}, then say 'finished'.", n + 2),
            ]) + (False,)
        if kind == "search":
            o = r.choice(ARM_ITEMS)
            return r.choice([
                (f"Find the {o} and put it in the {place}.", 2), (f"Look for a {o} on the table.", 1),
                (f"Find the {o}, pick it up and hand it over by dropping it on the {place}.", 3),
            ]) + (False,)
        if kind == "conditional":
            o = r.choice(ARM_ITEMS)
            return r.choice([
                (f"If there is a {o}, put it in the {place}; otherwise say that the table is clear.", 2),
                (f"Is the {o} on the table? If so, move it to the {place}.", 2),
                (f"If you are holding something, drop it in the {place}, then pick up the {a}.", 2),
            ]) + (False,)
        if kind == "vague":
            fruit = [x for x in items if x in FRUIT]
            hardware = [x for x in items if x in HARDWARE]
            return r.choice([
                ("Tidy up the table.", len(items)), (f"Clear everything into the {place}.", len(items)),
                (f"Sort the table: fruit into the {place}, the rest stays.", max(1, len(fruit))),
                (f"Collect the hardware in the {place}.", max(1, len(hardware))),
                (f"Make some room next to the {a}.", 1),
            ]) + (False,)
        return r.choice([
            (f"The {a} slipped out of the gripper. Pick it up again and put it in the {place}.", 2),
            (f"The {place} is full. Put the {a} next to it instead.", 1),
            (f"The grasp on the {a} failed. Try again, then drop it in the {place}.", 2),
            (f"Someone took the {b} away. Continue with the {a}: put it in the {place}.", 1),
        ]) + (True,)


def _list(names: list[str]) -> str:
    names = [f"the {n}" for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _sentence(clauses: list[str]) -> str:
    text = ", ".join(clauses)
    return text[0].upper() + text[1:] + "."


def _join(r: random.Random, clauses: list[str]) -> str:
    style = r.randint(0, 2)
    if style == 0:
        return _sentence([", then ".join(clauses[:-1]) + " and " + clauses[-1]])
    if style == 1:
        return " ".join(_sentence([c]) for c in clauses[:1]) + " " + " ".join(
            _sentence([("then " if i < len(clauses) - 2 else "finally ") + c]) for i, c in enumerate(clauses[1:]))
    return " ".join(f"{i}) {c}." for i, c in enumerate(clauses, 1))


def _artifact_scene(r: random.Random, names: list[str]) -> str:
    def box(n: str) -> str:
        return (f"{n} x:{r.uniform(0.05, 0.95):.2f} y:{r.uniform(0.05, 0.95):.2f} "
                f"width:{r.uniform(0.02, 0.3):.2f} height:{r.uniform(0.02, 0.3):.2f}")
    return "Scene: [" + ", ".join(box(n) for n in names) + "]"


def render(r: random.Random, style: str, scene: list[str], text: str, error: bool) -> str:
    if style == "artifact":
        return f"{_artifact_scene(r, scene)}, Task: [{'E' if error else 'A'}] {text}"
    if error:
        return f"ALERT: {text.split('. ', 1)[0]}. Scene: [{', '.join(scene)}]. {text.split('. ', 1)[-1]}"
    return f"Scene: [{', '.join(scene)}]. {text}"


KINDS = {"tello": {"single": 16, "multi": 44, "search": 16, "conditional": 16, "vague": 12, "error": 16},
         "indy7": {"single": 10, "multi": 20, "search": 8, "conditional": 8, "vague": 6, "error": 8},
         "fltrnn_arm": {"single": 10, "multi": 20, "search": 8, "conditional": 8, "vague": 6, "error": 8}}


def build(seed: int) -> list[dict]:
    r = random.Random(seed)
    rows: list[dict] = []
    seen: set[str] = set()
    for robot, kinds in KINDS.items():
        for kind, count in kinds.items():
            made = 0
            while made < count:
                world = Drone(r) if robot == "tello" else Arm(r)
                text, steps, error = world.task(kind)
                style = "artifact" if made % 2 else "project"
                task_input = render(r, style, world.scene, text, error)
                if text in seen:  # distinct instructions; a scene alone does not make a new task
                    continue
                seen.add(text)
                made += 1
                robot_type, robot_system = ROBOTS[robot]
                rows.append({"id": f"{robot}-{kind}-{made:02d}", "robot_type": robot_type, "robot_system": robot_system,
                             "task_input": task_input, "style": style, "kind": kind, "steps": steps})
    # A third held out, stratified by robot and style.
    strata: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        strata.setdefault((row["robot_system"], row["style"]), []).append(row)
    for group in strata.values():
        held = set(id(x) for x in r.sample(group, round(len(group) / 3)))
        for row in group:
            row["split"] = "heldout" if id(row) in held else "tune"
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "config/corpus/plan_tasks.jsonl"))
    args = parser.parse_args()
    rows = build(args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    held = sum(row["split"] == "heldout" for row in rows)
    print(f"{out}: {len(rows)} tasks, {held} held out")


if __name__ == "__main__":
    main()
