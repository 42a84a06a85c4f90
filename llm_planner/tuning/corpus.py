"""The tuning corpus: instruction → plan pairs for each bundled skill set, written by templates.

Each template is a kind of task (one action, several, counted repeats, search then act,
conditionals, vague requests, moves with units, follow-ups after a failure, objects absent from
the scene) with several phrasings. A template builds the task's actions once, in skill-set-free
terms, and each skill set renders them in its own syntax, so a drone's and an arm's plans say
the same thing in their own calls. Every row lists what a plan that does the task must call and
name (`required_skills`, alternatives `a|b`; `required_objects`), and every plan passes
`plan_check` and `task_check` before it is written.

The split is by wording: whole templates are held out, and of the other templates with three
phrasings or more their last one, so the held-out part asks for things in words the tuning
never saw.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from llm_planner.catalog.grammar import TaskScope, check_plan
from llm_planner.catalog.skills import SkillSet, load_skill_set
from llm_planner.catalog.tokenizer import load_tokenizer
from llm_planner.planning.plan_check import check_generated_plan
from llm_planner.planning.replan import Failure, follow_up_text
from llm_planner.planning.task_check import TaskNeeds, check_task
from llm_planner.settings.config import VllmConfig
from llm_planner.tuning import lexicon

SKILL_SETS = {"minispec_drone": "tello", "minispec_arm": "indy7", "python_arm": "fltrnn_arm"}  # -> robot type
# A task whose plan is longer than the planner's default `vllm.max_plan_tokens` (times the skill
# set's `plan_token_scale`) is not written: no model could answer it within the planner's limit.
PLAN_TOKEN_LIMIT = VllmConfig.model_fields["max_plan_tokens"].default

DRONE_THINGS = [
    "door",
    "window",
    "chair",
    "table",
    "person",
    "dog",
    "cat",
    "bicycle",
    "car",
    "tree",
    "bench",
    "lamp",
    "tv",
    "sofa",
    "shelf",
    "clock",
    "cup",
    "bottle",
    "backpack",
    "umbrella",
    "plant",
    "box",
    "ladder",
    "fence",
    "gate",
    "statue",
    "kite",
    "ball",
    "drone dock",
    "red car",
    "blue door",
    "trash can",
    "mailbox",
    "painting",
    "helmet",
    "truck",
    "bird",
    "book",
    "laptop",
    "fridge",
]
ARM_THINGS = [
    "apple",
    "banana",
    "orange",
    "lemon",
    "cup",
    "mug",
    "spoon",
    "fork",
    "sponge",
    "marker",
    "eraser",
    "stapler",
    "screw",
    "bolt",
    "nut",
    "cube",
    "red block",
    "blue block",
    "green block",
    "tennis ball",
    "battery",
    "tape",
    "scissors",
    "toy car",
    "can",
    "bottle cap",
    "glue stick",
    "pen",
    "key",
    "dice",
]
ARM_PLACES = [
    "bowl",
    "box",
    "tray",
    "bin",
    "basket",
    "plate",
    "crate",
    "drawer",
    "shelf",
    "blue bowl",
    "red box",
    "left tray",
    "pan",
    "jar",
    "cup holder",
]


# --------------------------------------------------------------------------- actions
# An action is a tuple: ("move", direction, cm), ("turn", "cw"|"ccw", degrees[, "any": the task
# names no direction, so a plan may turn either way]), ("goto", obj),
# ("photo",), ("wait", s), ("say", text), ("pick", obj), ("place", place), ("repeat", n, body),
# ("if_found", obj, body[, else body]), ("if_holding", body), ("for_each", [objs], body) where body uses VAR.
VAR = "\x00obj"
_MOVE = {"forward": "mf", "back": "mb", "left": "ml", "right": "mr", "up": "mu", "down": "md"}


def _q(obj: str) -> str:
    return "obj" if obj == VAR else f"'{obj}'"


def _minispec(skill_set: SkillSet, actions: list) -> list[str]:
    out = []
    for a in actions:
        kind = a[0]
        if kind == "move":
            out.append(f"{_MOVE[a[1]]}({a[2]})")
        elif kind == "turn":
            out.append(f"{'tc' if a[1] == 'cw' else 'tu'}({a[2]})")
        elif kind == "goto":
            out.append(f"g({_q(a[1])})")
        elif kind == "scan":
            out.append(f"s({_q(a[1])})")
        elif kind == "photo":
            out.append("tp()")
        elif kind == "wait":
            out.append(f"d({a[1]})")
        elif kind == "say":
            out.append(f"l('{a[1]}')")
        elif kind == "ask":
            out.append(f"l(p('{a[1]}'))")
        elif kind == "pause":  # wait until the workspace is clear
            out.append("d(3)")
        elif kind == "if_seen_say":
            out.append(f"?iv('{a[1]}')==True{{l('{a[2]}')}}")
        elif kind == "pick":
            out += [f"g({_q(a[1])})", f"pk({_q(a[1])})"]
        elif kind == "place":
            out += [f"g({_q(a[1])})", f"dr({_q(a[1])})"]
        elif kind == "repeat":
            out.append(f"{a[1]}{{{';'.join(_minispec(skill_set, a[2]))}}}")
        elif kind == "if_found":
            out.append(f"?s({_q(a[1])})==True{{{';'.join(_minispec(skill_set, a[2]))}}}")
        elif kind == "for_each":  # MiniSpec has no list loop: the body once per object
            for obj in a[1]:
                out += _minispec(skill_set, [_bind(step, obj) for step in a[2]])
        else:
            raise ValueError(f"{skill_set.name} cannot say {kind}")
    return out


def _bind(action: tuple, obj: str) -> tuple:
    return tuple(obj if part == VAR else part for part in action)


def _python(actions: list, indent: str = "") -> list[str]:
    out = []
    for a in actions:
        kind = a[0]
        if kind in ("pick", "place"):
            target = _q(a[1])
            out += [
                f"{indent}move_to(object_x({target}), object_y({target}))",
                f"{indent}{'take' if kind == 'pick' else 'drop'}({target})",
            ]
        elif kind == "say":
            out.append(f"{indent}say('{a[1]}')")
        elif kind == "if_seen_say":
            out += [f"{indent}if object_x('{a[1]}') > 0:", f"{indent}    say('{a[2]}')"]
        elif kind == "pause":  # the Python arm cannot wait: it says why it stops
            out.append(f"{indent}say('paused: someone is in the workspace')")
        elif kind == "repeat":
            out += [f"{indent}for i in range({a[1]}):"] + _python(a[2], indent + "    ")
        elif kind == "if_holding":
            out += [f"{indent}if is_holding():"] + _python(a[1], indent + "    ")
        elif kind == "if_found":  # an object the arm cannot find has no x
            out += [f"{indent}if object_x({_q(a[1])}) > 0:"] + _python(a[2], indent + "    ")
            if len(a) > 3:
                out += [f"{indent}else:"] + _python(a[3], indent + "    ")
        elif kind == "for_each":
            names = ", ".join(f"'{o}'" for o in a[1])
            out += [f"{indent}for obj in [{names}]:"] + _python(a[2], indent + "    ")
        else:
            raise ValueError(f"python_arm cannot say {kind}")
    return out


def render_plan(skill_set: SkillSet, actions: list) -> str:
    if skill_set.syntax == "python":
        return "".join(line + "\n" for line in _python(actions))
    return "".join(statement + ";" for statement in _minispec(skill_set, actions))


def needed_skills(skill_set: SkillSet, actions: list) -> list[str]:
    """The calls a plan doing these actions must make (a turn either way counts for a turn)."""
    python = skill_set.syntax == "python"
    out: list[str] = []

    def add(name: str) -> None:
        if name not in out:
            out.append(name)

    for a in actions:
        kind = a[0]
        if kind == "move":
            add(_MOVE[a[1]])
        elif kind == "turn":
            add("tc|tu" if a[-1] == "any" else ("tc" if a[1] == "cw" else "tu"))
        elif kind == "goto":
            add("g")
        elif kind == "photo":
            add("tp")
        elif kind == "wait" or (kind == "pause" and not python):
            add("d")
        elif kind == "pause":
            add("say")
        elif kind in ("say", "ask", "if_seen_say"):
            add("say" if python else "l")
        elif kind == "pick":
            add("take" if python else "pk")
        elif kind == "place":
            add("drop" if python else "dr")
        elif kind in ("if_found", "scan") and not python:
            add("s")
        elif kind == "if_holding":
            add("is_holding")
        for part in a[1:]:
            if isinstance(part, list) and part and isinstance(part[0], tuple):
                for name in needed_skills(skill_set, part):
                    add(name)
    return out


def named_objects(actions: list) -> list[str]:
    out: list[str] = []
    for a in actions:
        for part in a[1:]:
            if isinstance(part, str) and a[0] in ("goto", "pick", "place", "if_found", "scan") and part != VAR:
                if part not in out:
                    out.append(part)
            elif isinstance(part, list):
                if part and isinstance(part[0], tuple):
                    out += [o for o in named_objects(part) if o not in out]
                else:  # for_each's objects
                    out += [o for o in part if o not in out]
    return out


# --------------------------------------------------------------------------- templates
@dataclass(frozen=True)
class Template:
    name: str
    kind: str
    skill_sets: tuple[str, ...]
    phrasings: tuple[str, ...]
    # (rng, scene, absent) -> (fields for the phrasing, actions)
    build: Callable[[random.Random, list[str], list[str]], tuple[dict, list]]
    heldout: bool = False  # the whole template is held out
    alert: str = ""  # an error follow-up: the failure, put before the scene
    voiced: bool = True  # said in one of lexicon.voice's voices (a warning keeps its own)


DRONE, ARMS, MINI_ARM, PY_ARM = ("minispec_drone",), ("minispec_arm", "python_arm"), ("minispec_arm",), ("python_arm",)


def _seconds(rng: random.Random) -> tuple[str, int]:
    s = rng.choice([1, 2, 3, 5])
    return f"{s} second{'s' if s > 1 else ''}", s


def _count(rng: random.Random) -> tuple[str, int]:
    n = rng.choice([2, 3, 4, 5, 6])
    return rng.choice([str(n), ["two", "three", "four", "five", "six"][n - 2]]), n


_DIRS = {
    "forward": ["forward", "ahead"],
    "back": ["backward", "back"],
    "left": ["left"],
    "right": ["right"],
    "up": ["up"],
    "down": ["down"],
}


def _drone_step(rng: random.Random, scene: list[str]) -> tuple[str, list]:
    """One simple drone action as a phrase, for multi-step tasks."""
    choice = rng.randrange(7)
    if choice == 0:
        direction = rng.choice(list(_DIRS))
        phrase, cm = lexicon.move_phrase(rng, direction)
        return phrase, [("move", direction, cm)]
    if choice == 1:
        side = rng.choice(["cw", "ccw"])
        phrase, deg = lexicon.turn_phrase(rng, side)
        return phrase, [("turn", side, deg)]
    if choice == 6:
        return rng.choice(lexicon.TURN_AROUND), [("turn", "cw", 180, "any")]
    if choice == 2:
        return rng.choice(["take a picture", "take a photo", "snap a photo"]), [("photo",)]
    if choice == 3:
        obj = rng.choice(scene)
        return f"{rng.choice(['fly to', 'go to', 'approach'])} the {obj}", [("goto", obj)]
    if choice == 4:
        words, s = _seconds(rng)
        return f"{rng.choice(['wait', 'hover'])} {words}", [("wait", s)]
    text = rng.choice(["done", "all clear", "on my way", "arrived"])
    return f"report '{text}'", [("say", text)]


def _arm_step(rng: random.Random, scene: list[str], places: list[str]) -> tuple[str, list]:
    if rng.random() < 0.6:
        obj, place = rng.choice(scene), rng.choice(places)
        verb = rng.choice(["put the {o} in the {p}", "place the {o} on the {p}", "move the {o} to the {p}"])
        return verb.format(o=obj, p=place), [("pick", obj), ("place", place)]
    if rng.random() < 0.5:
        obj = rng.choice(scene)
        return f"{rng.choice(['pick up', 'grab', 'take'])} the {obj}", [("pick", obj)]
    text = rng.choice(["done", "ready", "finished"])
    return f"say '{text}'", [("say", text)]


def _t(name, kind, skill_sets, phrasings, build, heldout=False, alert="", voiced=True):
    return Template(name, kind, skill_sets, tuple(phrasings), build, heldout, alert, voiced)


def _actions(steps: list[tuple[str, list]]) -> list:
    """The actions of phrased steps, in order."""
    return [a for _, actions in steps for a in actions]


def _move(rng, scene, absent):
    direction = rng.choice(list(_DIRS))
    phrase, cm = lexicon.move_phrase(rng, direction)
    return {"phrase": phrase}, [("move", direction, cm)]


def _turn(rng, scene, absent):
    side = rng.choice(["cw", "ccw"])
    phrase, deg = lexicon.turn_phrase(rng, side)
    return {"phrase": phrase}, [("turn", side, deg)]


def _photo_of(rng, scene, absent):
    obj = rng.choice(scene)
    return {"o": obj}, [("goto", obj), ("photo",)]


def _goto(rng, scene, absent):
    obj = rng.choice(scene)
    return {"o": obj}, [("goto", obj)]


def _multi_drone(rng, scene, absent):
    steps = [_drone_step(rng, scene) for _ in range(rng.choice([2, 3, 3, 4]))]
    return {"steps": steps}, _actions(steps)


def _photos(rng, scene, absent):
    words, n = _count(rng)
    return {"n": words}, [("repeat", n, [("photo",)])]


def _directions(rng, scene, absent):
    n = rng.choice([2, 3, 4, 6, 8])
    return {"n": str(n)}, [("repeat", n, [("photo",), ("turn", "cw", 360 // n, "any")])]


def _square(rng, scene, absent):
    words, cm = lexicon.distance(rng)
    return {"dist": words}, [("repeat", 4, [("move", "forward", cm), ("turn", "cw", 90, "any")])]


def _spins(rng, scene, absent):
    words, n = _count(rng)
    return {"n": words}, [("repeat", n, [("turn", "cw", 360, "any")])]


def _search_photo(rng, scene, absent):
    obj = rng.choice(scene + absent)
    return {"o": obj}, [("if_found", obj, [("goto", obj), ("photo",)])]


def _absent_goto(rng, scene, absent):
    obj = rng.choice(absent)
    return {"o": obj}, [("if_found", obj, [("goto", obj)])]


def _look_around(rng, scene, absent):
    return {}, [("repeat", 4, [("turn", "cw", 90, "any"), ("photo",)])]


def _patrol(rng, scene, absent):
    words, cm = lexicon.distance(rng)
    return {"dist": words}, [("repeat", 4, [("move", "forward", cm), ("turn", "ccw", 90, "any")])]


def _greet(rng, scene, absent):
    obj = rng.choice([o for o in scene if o in ("person", "dog", "cat")] or scene)
    return {"o": obj}, [("goto", obj), ("say", "hello")]


def _zigzag(rng, scene, absent):
    words, cm = lexicon.distance(rng)
    n = rng.choice([2, 3])
    return {"dist": words, "n": str(n)}, [
        ("repeat", n, [("move", "right", cm), ("move", "forward", cm), ("move", "left", cm), ("move", "forward", cm)])
    ]


def _blocked(rng, scene, absent):
    words, cm = lexicon.distance(rng)
    return {"dist": words}, [("move", "up", 50), ("move", "forward", cm)]


def _lost(rng, scene, absent):
    obj = rng.choice(scene)
    return {"o": obj}, [("scan", obj), ("goto", obj), ("photo",)]


def _blurred(rng, scene, absent):
    obj = rng.choice(scene)
    return {"o": obj}, [("wait", 1), ("photo",)]


def _pick(rng, scene, absent):
    obj = rng.choice(scene)
    return {"o": obj}, [("pick", obj)]


def _put(rng, scene, absent):
    obj = rng.choice([s for s in scene if s not in ARM_PLACES])
    place = rng.choice([s for s in scene if s in ARM_PLACES])
    return {"o": obj, "p": place}, [("pick", obj), ("place", place)]


def _put_two(rng, scene, absent):
    things = [s for s in scene if s not in ARM_PLACES]
    a, b = rng.sample(things, 2)
    place = rng.choice([s for s in scene if s in ARM_PLACES])
    return {"a": a, "b": b, "p": place}, [("for_each", [a, b], [("pick", VAR), ("place", place)])]


def _clear(rng, scene, absent):
    things = [s for s in scene if s not in ARM_PLACES]
    place = rng.choice([s for s in scene if s in ARM_PLACES])
    return {"p": place}, [("for_each", things, [("pick", VAR), ("place", place)])]


def _arm_steps(rng: random.Random, things: list[str], places: list[str], count: int) -> list[tuple[str, list]]:
    """`count` arm steps, none of which picks while an earlier one left an object in the
    gripper (it holds one at a time)."""
    steps: list[tuple[str, list]] = []
    holding = False
    while len(steps) < count:
        phrase, actions = _arm_step(rng, things, places)
        if holding and any(a[0] == "pick" for a in actions):
            continue
        steps.append((phrase, actions))
        for action in actions:
            holding = {"pick": True, "place": False}.get(action[0], holding)
    return steps


def _multi_arm(rng, scene, absent):
    things = [s for s in scene if s not in ARM_PLACES]
    places = [s for s in scene if s in ARM_PLACES]
    steps = _arm_steps(rng, things, places, rng.choice([2, 3]))
    return {"steps": steps}, _actions(steps)


def _back_and_forth(rng, scene, absent):
    things = [s for s in scene if s not in ARM_PLACES]
    obj = rng.choice(things)
    a, b = rng.sample([s for s in scene if s in ARM_PLACES], 2)
    words, n = _count(rng)
    return {"o": obj, "a": a, "b": b, "n": words}, [
        ("repeat", n, [("pick", obj), ("place", b), ("pick", obj), ("place", a)])
    ]


def _arm_search(rng, scene, absent):
    obj = rng.choice(absent)
    place = rng.choice([s for s in scene if s in ARM_PLACES])
    return {"o": obj, "p": place}, [("if_found", obj, [("pick", obj), ("place", place)])]


def _arm_search_python(rng, scene, absent, otherwise: bool = False):
    """Put it away if it is there. The Python arm acts only on what the scene lists: an object
    the scene lacks gets the other branch (or a report) at once."""
    things = [s for s in scene if s not in ARM_PLACES]
    obj = rng.choice(absent + things)
    place = rng.choice([s for s in scene if s in ARM_PLACES])
    found = [("pick", obj), ("place", place)]
    fields = {"o": obj, "p": place, "otherwise": ""}
    text = f"there is no {obj}"
    instead = [("say", text)]
    others = [t for t in things if t != obj]
    if otherwise and others and rng.random() < 0.4:
        other = rng.choice(others)
        fields["otherwise"], instead = f"put the {other} there instead", [("pick", other), ("place", place)]
    elif otherwise:
        fields["otherwise"] = f"say '{text}'"
    if obj in absent:
        return fields, instead
    return fields, [("if_found", obj, found, instead) if otherwise else ("if_found", obj, found)]


def _arm_search_else(rng, scene, absent):
    return _arm_search_python(rng, scene, absent, otherwise=True)


def _holding(rng, scene, absent):
    place = rng.choice([s for s in scene if s in ARM_PLACES])
    return {"p": place}, [("if_holding", [("place", place)])]


def _slipped(rng, scene, absent):
    return _put(rng, scene, absent)


def _full(rng, scene, absent):
    obj = rng.choice([s for s in scene if s not in ARM_PLACES])
    full, other = rng.sample([s for s in scene if s in ARM_PLACES], 2)
    return {"o": obj, "p": full, "q": other}, [("pick", obj), ("place", other)]


def _arm_absent_say(rng, scene, absent):
    obj = rng.choice(absent)
    return {"o": obj}, [("say", f"there is no {obj}")]


def _arm_wait_say(rng, scene, absent):
    words, s = _seconds(rng)
    return {"s": words}, [("wait", s), ("say", "ready")]


def _report(rng, scene, absent):
    text = rng.choice(["ready", "done", "start", "all clear"])
    return {"t": text}, [("say", text)]


# Compositions: any simple steps inside a counted loop, a conditional, after a failure, or after
# one plain step. They teach how a task's words nest, not one more fixed kind of task.
def _repeat_drone(rng, scene, absent):
    steps = [_drone_step(rng, scene) for _ in range(rng.choice([1, 2, 2, 3]))]
    words, n = _count(rng)
    return {"steps": steps, "n": words}, [("repeat", n, _actions(steps))]


def _repeat_arm(rng, scene, absent):
    things = [s for s in scene if s not in ARM_PLACES]
    places = [s for s in scene if s in ARM_PLACES]
    steps: list[tuple[str, list]] = []
    while len(steps) < rng.choice([1, 1, 2]):
        phrase, actions = _arm_step(rng, things, places)
        if actions[-1][0] != "pick":  # picking again and again, holding the object, is no task
            steps.append((phrase, actions))
    words, n = _count(rng)
    return {"steps": steps, "n": words}, [("repeat", n, _actions(steps))]


def _if_seen_drone(rng, scene, absent):
    obj = rng.choice(scene + absent)
    steps = [_drone_step(rng, [obj]) for _ in range(rng.choice([1, 2]))]
    return {"o": obj, "steps": steps}, [("if_found", obj, _actions(steps))]


def _if_seen_arm(rng, scene, absent):
    obj = rng.choice(absent + [s for s in scene if s not in ARM_PLACES])
    verb, place = (
        rng.choice(["put it in the {p}", "place it on the {p}", "move it to the {p}"]),
        rng.choice([s for s in scene if s in ARM_PLACES]),
    )
    steps = [(verb.format(p=place), [("pick", obj), ("place", place)])]
    if rng.random() < 0.4:
        text = rng.choice(["done", "found it"])
        steps.append((f"say '{text}'", [("say", text)]))
    return {"o": obj, "steps": steps}, [("if_found", obj, _actions(steps))]


def _step_then_repeat(rng, scene, absent):
    first, first_actions = _drone_step(rng, scene)
    body, body_actions = _drone_step(rng, scene)
    words, n = _count(rng)
    return {"a": first, "b": body, "n": words}, first_actions + [("repeat", n, body_actions)]


_FAILURES_DRONE = [
    "ALERT: {call} failed: the battery is low.",
    "ALERT: {call} failed: the drone lost tracking.",
    "ALERT: {call} failed: a gust pushed the drone off course.",
]
_FAILURES_ARM = [
    "ALERT: {call} failed: the gripper did not close.",
    "ALERT: {call} failed: the arm hit its limit.",
    "ALERT: {call} failed: the object moved.",
]


def _after_failure_drone(rng, scene, absent):
    failed = rng.choice([f"g('{rng.choice(scene)}')", "tp()", "mf(100)", "tc(90)"])
    steps = [_drone_step(rng, scene) for _ in range(rng.choice([1, 2]))]
    return {"steps": steps, "failure": rng.choice(_FAILURES_DRONE).format(call=failed)}, _actions(steps)


def _after_failure_arm(rng, scene, absent):
    things = [s for s in scene if s not in ARM_PLACES]
    places = [s for s in scene if s in ARM_PLACES]
    failed = rng.choice(["pk('{}')", "g('{}')", "dr('{}')"]).format(rng.choice(scene))
    steps = _arm_steps(rng, things, places, rng.choice([1, 2]))
    return {"steps": steps, "failure": rng.choice(_FAILURES_ARM).format(call=failed)}, _actions(steps)


# --------------------------------------------------------------------------- broader tasks
def _turn_around_goto(rng, scene, absent):
    obj = rng.choice(scene)
    return {"around": rng.choice(lexicon.TURN_AROUND), "o": obj}, [("turn", "cw", 180, "any"), ("goto", obj)]


def _behind_photo(rng, scene, absent):
    return {"around": rng.choice(lexicon.TURN_AROUND)}, [("turn", "cw", 180, "any"), ("photo",)]


_QUESTIONS = [
    "how many {o}s are there?",
    "is the {o} moving?",
    "what colour is the {o}?",
    "is anyone near the {o}?",
    "is the {o} open?",
    "what is on the {o}?",
    "how far away is the {o}?",
    "is the {o} damaged?",
]


def _question_drone(rng, scene, absent):
    obj = rng.choice(scene)
    question = rng.choice([q for q in (q.format(o=obj) for q in _QUESTIONS) if len(q) <= 40])
    return {"q": question[0].upper() + question[1:]}, [("ask", question)]


def _question_arm(rng, scene, absent):
    obj = rng.choice(absent + [s for s in scene if s not in ARM_PLACES])
    return {"o": obj}, [("if_seen_say", obj, f"the {obj} is here")]


_IMPOSSIBLE = [
    "open the window",
    "make a cup of coffee",
    "charge your own battery",
    "call the owner",
    "sing a song",
    "unlock the front door",
    "water the plants",
    "switch the lights off",
    "play some music",
    "order a pizza",
    "fold the laundry",
    "close the curtains",
]


def _impossible(rng, scene, absent):
    job = rng.choice(_IMPOSSIBLE)
    return {"job": job}, [("say", f"cannot {job}")]


# Where a hazard is, in words, and which way moves the robot away from it.
_HAZARD_PLACES = {
    "ahead": ["{d} ahead", "right in front of you", "in your path", "{d} in front of you"],
    "behind": ["behind you", "coming up behind you", "{d} behind you"],
    "left": ["on your left", "to your left", "{d} to your left"],
    "right": ["on your right", "to your right", "{d} to your right"],
    "above": ["above you", "overhead", "{d} above you"],
    "below": ["below you", "right under you", "{d} below you"],
    "approaching": ["approaching you", "flying at you", "coming straight at you", "heading toward you"],
}
_AWAY = {
    "ahead": "back",
    "approaching": "back",
    "behind": "forward",
    "left": "right",
    "right": "left",
    "above": "down",
    "below": "up",
}
_DRONE_HAZARDS = [
    "a wall",
    "a person",
    "another drone",
    "a bird",
    "a tree branch",
    "a ceiling fan",
    "a pole",
    "a thrown ball",
    "a dog",
    "a glass door",
    "a hanging cable",
    "a lamp",
    "a curtain",
    "a child",
]
_REPLY_DRONE = [
    "",
    "Get clear of it.",
    "Move away from it and hover.",
    "Avoid it.",
    "Get out of the way, then wait.",
    "Keep a safe distance.",
    "Evade it and report.",
    "Stay safe.",
]


def _hazard(rng) -> tuple[str, str]:
    """(the hazard and where it is, in words; the direction that moves away from it)"""
    where = rng.choice(list(_HAZARD_PLACES))
    place = rng.choice(_HAZARD_PLACES[where]).format(d=f"{rng.choice([20, 25, 30, 40, 50])} cm")
    return f"{rng.choice(_DRONE_HAZARDS)} is {place}", _AWAY[where]


def _escape_then(rng, away: str, reply: str) -> list:
    actions: list[tuple[str | int, ...]] = [("move", away, rng.choice([50, 60, 80, 100]))]
    if "hover" in reply or "wait" in reply:
        actions.append(("wait", rng.choice([1, 2, 3])))
    elif "report" in reply:
        actions.append(("say", "clear of the hazard"))
    return actions


def _hazard_alert(rng, scene, absent):
    hazard, away = _hazard(rng)
    reply = rng.choice(_REPLY_DRONE)
    return {"reply": reply, "hazard": hazard[0].upper() + hazard[1:]}, _escape_then(rng, away, reply)


# Which way a move goes -> where a hazard it flies into lies (a key of _HAZARD_PLACES), and back.
_INTO = {"forward": "ahead", "back": "behind", "left": "left", "right": "right", "up": "above", "down": "below"}
_TOWARD = {where: direction for direction, where in _INTO.items()}


def _hazard_artifact(rng, scene, absent):
    """The artifact's `[E]` follow-up: a plan stopped by a hazard. The recovery moves away from
    it first, then finishes the plan: an interrupted goto again, the steps not yet run, but no
    move into the hazard."""
    obj = rng.choice(scene)
    original: list[tuple] = []
    while len(original) < rng.choice([2, 2, 3]):
        _, actions = _drone_step(rng, [obj])
        if actions[0][0] not in ("say", "wait") or original:
            original += actions
    skill_set = load_skill_set("minispec_drone")
    stopped = rng.randrange(len(original))
    interrupted = original[stopped]
    if interrupted[0] == "move":  # flying into it: part of the move ran
        where = _INTO[interrupted[1]]
        partly = ("move", interrupted[1], max(20, interrupted[2] // 2))
        ran = original[:stopped] + [partly] if rng.random() < 0.7 else []
    else:
        where = rng.choice(list(_HAZARD_PLACES))
        ran = original[: stopped + (interrupted[0] == "goto")]
    if not ran and stopped:
        ran = original[:stopped]
    hazard = f"{rng.choice(_DRONE_HAZARDS)} is {rng.choice(_HAZARD_PLACES[where])}"
    hazard = hazard.format(d=f"{rng.choice([20, 25, 30, 40, 50])} cm")
    toward = _TOWARD.get(where, "forward")  # a hazard coming closer: no move ahead
    rest = [a for a in original[stopped:] if not (a[0] == "move" and a[1] == toward)]
    done = ", ".join(_minispec(skill_set, ran)) or "none"
    reply = rng.choice(["", "", "Please fix it.", "Give me a new plan.", "Recover safely.", "Finish the task safely."])
    fields = {
        "plan": render_plan(skill_set, original),
        "hazard": hazard,
        "done": done,
        "reply": reply,
        "speaker": ROBOT_SPEAKING,
    }
    return fields, [("move", _AWAY[where], rng.choice([50, 60, 80, 100]))] + rest


_WARNINGS = ["Careful:", "Watch out,", "Look out!", "Caution:", "Hey,", "Danger:", "Stop -", "Mind out:"]
_HOLD = ["hold still for {s}", "hover in place for {s}", "stay where you are for {s}", "pause for {s}"]


def _safe_request(rng, scene: list[str], where: str) -> tuple[list, list]:
    """What a person asks the drone to do about a hazard, as steps: a move that is not into it
    (or holding still), then maybe more steps that do not move into it either."""
    toward = _TOWARD.get(where)
    steps: list[tuple[str, list]]
    if rng.random() < 0.2:
        words, s = _seconds(rng)
        steps = [(rng.choice(_HOLD).format(s=words), [("wait", s)])]
    else:
        direction = _AWAY[where] if rng.random() < 0.6 else rng.choice([d for d in _DIRS if d != toward])
        phrase, cm = lexicon.move_phrase(rng, direction)
        steps = [(phrase, [("move", direction, cm)])]
    while len(steps) < rng.choice([1, 2, 2, 3]):
        phrase, actions = _drone_step(rng, scene)
        if actions[0][0] != "move" or actions[0][1] != toward:
            steps.append((phrase, actions))
    return steps, _actions(steps)


def _hazard_request(rng, scene, absent):
    where = rng.choice(list(_HAZARD_PLACES))
    hazard = f"{rng.choice(_DRONE_HAZARDS)} is {rng.choice(_HAZARD_PLACES[where])}"
    hazard = hazard.format(d=f"{rng.choice([20, 25, 30, 40, 50])} cm")
    steps, actions = _safe_request(rng, scene, where)
    fields = {"hazard": hazard, "Hazard": hazard[0].upper() + hazard[1:], "steps": steps, "warn": rng.choice(_WARNINGS)}
    return fields, actions


ROBOT_SPEAKING = "I"  # the artifact's follow-ups are the robot's words about itself
_ARM_FAILURES = [
    ("the {o} slipped out of the gripper", "retry"),
    ("the gripper missed the {o}", "retry"),
    ("the {o} was knocked over", "retry"),
    ("a person's hand is in the workspace", "pause"),
    ("someone is reaching over the table", "pause"),
    ("the {p} is blocked by a box", "other"),
]


def _arm_failure(rng, scene, absent):
    things = [s for s in scene if s not in ARM_PLACES]
    places = [s for s in scene if s in ARM_PLACES]
    obj, place = rng.choice(things), rng.choice(places)
    failure, what = rng.choice(_ARM_FAILURES)
    if what == "other" and len(places) < 2:
        failure, what = _ARM_FAILURES[0]
    other = rng.choice([p for p in places if p != place]) if what == "other" else place
    actions: list[tuple] = [("pick", obj), ("place", other)]
    if what == "pause":
        actions = [("pause",)] + actions
    return {
        "failure": failure.format(o=obj, p=place),
        "o": obj,
        "p": place,
        "speaker": ROBOT_SPEAKING,
        "plan": f"g('{obj}');pk('{obj}');g('{place}');dr('{place}');",
    }, actions


def _arm_alert(rng, scene, absent):
    fields, actions = _arm_failure(rng, scene, absent)
    fields["failure"] = fields["failure"][0].upper() + fields["failure"][1:]
    return fields, actions


def _spatial_scene(rng, kinds: list[str], others: list[str]) -> tuple[list, str, str, str]:
    """Two of one kind of object apart on one axis, with other objects: (scene boxes, kind,
    the words that tell the two apart, the name of the one they mean)."""
    kind = rng.choice(kinds)
    axis = rng.choice(["x", "y", "size"])
    lo, hi = (rng.uniform(0.05, 0.3), rng.uniform(0.7, 0.95))
    first, second = {"x": lo, "y": 0.5, "w": 0.1}, {"x": hi, "y": 0.5, "w": 0.1}
    if axis == "y":
        first, second = {"x": 0.5, "y": lo, "w": 0.1}, {"x": 0.5, "y": hi, "w": 0.1}
    elif axis == "size":
        first, second = {"x": 0.45, "y": 0.5, "w": 0.06}, {"x": 0.55, "y": 0.5, "w": 0.2}
    boxes = [(f"{kind}_1", first), (f"{kind}_2", second)]
    rng.shuffle(boxes)
    named = dict(boxes)
    pick = rng.choice([0, 1])
    target = f"{kind}_{pick + 1}"
    me = named[target]
    other = named[f"{kind}_{2 - pick}"]
    if axis == "x":
        words = (
            rng.choice(["on the left", "on the left side", "to the left"])
            if me["x"] < other["x"]
            else rng.choice(["on the right", "on the right side", "to the right"])
        )
    elif axis == "y":
        words = (
            rng.choice(["nearer", "closer", "in front"])
            if me["y"] > other["y"]
            else rng.choice(["farther away", "further back", "at the back"])
        )
    else:
        words = rng.choice(["bigger", "larger"]) if me["w"] > other["w"] else rng.choice(["smaller", "little"])
    return _among(rng, [(n, b["x"], b["y"], b["w"]) for n, b in boxes], others), kind, words, target


def _among(rng, boxes: list, others: list[str]) -> list:
    """The boxes with the other objects anywhere in the picture, in a random order."""
    placed = boxes + [(name, rng.uniform(0.05, 0.95), rng.uniform(0.05, 0.95), 0.1) for name in others]
    rng.shuffle(placed)
    return placed


# The one at an end of three in a row: axis -> (words for the lowest value, for the highest).
_EXTREMES = {
    "x": (["leftmost", "left-most", "furthest left"], ["rightmost", "right-most", "furthest right"]),
    "y": (["farthest", "furthest back", "most distant"], ["nearest", "closest", "front-most"]),
    "size": (["smallest", "tiniest"], ["biggest", "largest"]),
}


def _spatial_three(rng, kinds: list[str], others: list[str]) -> tuple[list, str, str, str]:
    """Three of one kind in a row on one axis; the task means the one at an end (same return
    as `_spatial_scene`)."""
    kind = rng.choice(kinds)
    axis = rng.choice(list(_EXTREMES))
    values = [v / 100 for v in sorted(rng.sample(range(5, 96), 3))]  # lowest first
    names = [f"{kind}_{n}" for n in (1, 2, 3)]
    rng.shuffle(names)
    boxes = []
    for name, v in zip(names, values):
        x, y, w = (v, rng.uniform(0.4, 0.6), 0.08) if axis == "x" else (rng.uniform(0.2, 0.8), v, 0.08)
        # Sizes draw their own place; the draw above stays so that the seed-9 corpus the bundled
        # adapter was tuned on regenerates byte for byte.
        if axis == "size":  # widths 0.05-0.23
            x, y, w = rng.uniform(0.2, 0.8), rng.uniform(0.35, 0.65), 0.04 + v * 0.2
        boxes.append((name, x, y, w))
    high = rng.random() < 0.5
    target = names[2] if high else names[0]
    words = rng.choice(_EXTREMES[axis][1 if high else 0])
    return _among(rng, boxes, others), kind, words, target


def _which(kind: str, words: str) -> str:
    """'the bottle on the left', 'the nearer bottle'"""
    return f"the {kind} {words}" if " " in words else f"the {words} {kind}"


def _spatial_drone(rng, scene, absent):
    boxes, kind, words, target = rng.choice([_spatial_scene, _spatial_scene, _spatial_three])(
        rng, ["bottle", "chair", "person", "door", "box", "car", "tree"], scene[:3]
    )
    return {"_boxes": boxes, "which": _which(kind, words)}, [("goto", target), ("photo",)] if rng.random() < 0.5 else [
        ("goto", target)
    ]


def _spatial_arm(rng, scene, absent):
    places = [s for s in scene if s in ARM_PLACES]
    boxes, kind, words, target = rng.choice([_spatial_scene, _spatial_scene, _spatial_three])(
        rng, ["cup", "block", "apple", "bolt", "marker", "can"], places
    )
    place = rng.choice(places)
    return {"_boxes": boxes, "which": _which(kind, words), "p": place}, [("pick", target), ("place", place)]


# The planner's own follow-up after a robot failed a call (planning/replan.py writes its text).
def _replan_drone(rng, scene, absent):
    obj = rng.choice(scene)
    before = [_drone_step(rng, scene) for _ in range(rng.choice([0, 1]))]
    after = [_drone_step(rng, [obj]) for _ in range(rng.choice([0, 1]))]
    steps = before + [(f"fly to the {obj}", [("goto", obj)]), ("take a photo", [("photo",)])] + after
    original = f"Scene: [{', '.join(scene)}]. {_fill('{steps:, then }.', {'steps': steps})}"
    done = tuple(_minispec(load_skill_set("minispec_drone"), _actions(before)))  # what the robot reports done
    if rng.random() < 0.6:  # lost from view: look for it again, then the rest
        failure = Failure(0, f"g('{obj}')", f"g('{obj}'): '{obj}' is not in view", done, 0.0)
        actions = [("scan", obj), ("goto", obj), ("photo",)] + _actions(after)
    else:  # the call failed: try it again, then the rest
        failure = Failure(0, f"g('{obj}')", f"simulated failure of g('{obj}')", done, 0.0)
        actions = [("goto", obj), ("photo",)] + _actions(after)
    return {"_text": follow_up_text(original, failure)}, actions


def _replan_arm(rng, scene, absent):
    things = [s for s in scene if s not in ARM_PLACES]
    places = [s for s in scene if s in ARM_PLACES]
    obj, place = rng.choice(things), rng.choice(places)
    call = rng.choice(["pk", "dr"])
    original = f"Scene: [{', '.join(scene)}]. {lexicon.voice(rng, f'Put the {obj} in the {place}.')}"
    if call == "pk":
        failure = Failure(0, f"pk('{obj}')", f"simulated failure of pk('{obj}')", (f"g('{obj}')",), 0.0)
        actions = [("pick", obj), ("place", place)]
    else:
        failure = Failure(
            0,
            f"dr('{place}')",
            f"simulated failure of dr('{place}')",
            (f"g('{obj}')", f"pk('{obj}')", f"g('{place}')"),
            0.0,
        )
        actions = [("place", place)]
    return {"_text": follow_up_text(original, failure)}, actions


_COLOURS = ["red", "blue", "green", "yellow"]


def _sort_colour(rng, scene, absent):
    colours = rng.sample(_COLOURS, rng.choice([2, 3]))
    kind = rng.choice(["block", "cube", "ball", "marker"])
    holder = rng.choice(["bowl", "box", "tray", "bin"])
    things, holders = [f"{c} {kind}" for c in colours], [f"{c} {holder}" for c in colours]
    extra = rng.sample([t for t in ARM_THINGS if " " not in t], 1)
    listed = things + holders + extra
    rng.shuffle(listed)
    order = list(zip(things, holders))
    rng.shuffle(order)
    actions = [a for thing, place in order for a in (("pick", thing), ("place", place))]
    holders_word = holder + ("es" if holder.endswith("x") else "s")
    return {"_scene": listed, "kind": kind, "holder": holder, "holders": holders_word}, actions


def _the(objs: list[str]) -> str:
    """'the cup', 'the cup and the pen', 'the cup, the pen and the key'"""
    named = [f"the {o}" for o in objs]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _put_apart(rng, scene, absent):
    """Two objects, each to a place of its own."""
    a, b = rng.sample([s for s in scene if s not in ARM_PLACES], 2)
    p, q = rng.sample([s for s in scene if s in ARM_PLACES], 2)
    return {"a": a, "b": b, "p": p, "q": q}, [("pick", a), ("place", p), ("pick", b), ("place", q)]


def _two_groups(rng, scene, absent):
    """Some objects to one place, the rest to another (one loop per place in Python)."""
    things = rng.sample(ARM_THINGS, rng.choice([3, 4]))
    p, q = rng.sample(ARM_PLACES, 2)
    cut = rng.randint(2, len(things) - 1)
    first, rest = things[:cut], things[cut:]
    listed = things + [p, q]
    rng.shuffle(listed)
    actions: list = [("for_each", first, [("pick", VAR), ("place", p)])]
    if len(rest) > 1:
        actions.append(("for_each", rest, [("pick", VAR), ("place", q)]))
    else:
        actions += [("pick", rest[0]), ("place", q)]
    return {"_scene": listed, "first": _the(first), "rest": _the(rest), "p": p, "q": q}, actions


def _swap(rng, scene, absent):
    """Two objects trade places by way of a free third place."""
    a, b = rng.sample(ARM_THINGS, 2)
    p, q, spare = rng.sample(ARM_PLACES, 3)
    listed = [a, b, p, q, spare]
    rng.shuffle(listed)
    actions = [("pick", a), ("place", spare), ("pick", b), ("place", p), ("pick", a), ("place", q)]
    return {"_scene": listed, "a": a, "b": b, "p": p, "q": q, "r": spare}, actions


# Jobs an arm that can only pick, place and speak cannot do, on an object of the scene.
_IMPOSSIBLE_ARM = [
    "slice the {o}",
    "wash the {o}",
    "paint the {o} green",
    "fill the {o} with water",
    "sharpen the {o}",
    "weigh the {o}",
    "warm up the {o}",
    "glue the {o} shut",
    "charge the {o}",
    "screw the {o} tight",
    "polish the {o}",
    "tie up the {o}",
]


def _impossible_arm(rng, scene, absent):
    job = rng.choice(_IMPOSSIBLE_ARM).format(o=rng.choice([s for s in scene if s not in ARM_PLACES]))
    return {"job": job}, [("say", f"cannot {job}")]


_REPEAT_WORDS = [
    "Repeat {n} times: {steps:, then }.",
    "Do this {n} times: {steps: and then }.",
    "{steps:, then }; do all that {n} times.",
    "{n} times over, {steps: and }.",
]
_NEW_PLAN_WORDS = [
    "New plan: {steps:, then }.",
    "Instead, {steps: and then }.",
    "Forget the old plan and {steps:, then }.",
    "Now just {steps: and }.",
]

TEMPLATES = [
    _t("move", "single", DRONE, ["{phrase}.", "{phrase}, please.", "Now {phrase}.", "Could you {phrase}?"], _move),
    _t("turn", "single", DRONE, ["{phrase}.", "Please {phrase}.", "Go ahead and {phrase}."], _turn),
    _t(
        "photo_of",
        "multi",
        DRONE,
        [
            "Take a photo of the {o}.",
            "Fly to the {o} and take a picture of it.",
            "Get me a picture of the {o}.",
            "Go photograph the {o}.",
        ],
        _photo_of,
    ),
    _t(
        "goto",
        "single",
        DRONE,
        ["Fly to the {o}.", "Go to the {o}.", "Head over to the {o}.", "Approach the {o}."],
        _goto,
    ),
    _t(
        "multi",
        "multi",
        DRONE,
        ["{steps#}", "{steps:, then }.", "First {steps:, then }.", "{steps:; after that, }.", "{steps: and then }."],
        _multi_drone,
    ),
    _t("photos", "repeat", DRONE, ["Take {n} photos.", "Take {n} pictures in a row.", "Snap {n} photos."], _photos),
    _t(
        "directions",
        "repeat",
        DRONE,
        [
            "Take photos in {n} directions.",
            "Photograph {n} evenly spaced directions.",
            "Turn around in {n} steps, taking a photo at each.",
        ],
        _directions,
    ),
    _t(
        "square",
        "repeat",
        DRONE,
        [
            "Fly a square with sides of {dist}.",
            "Trace a square, {dist} per side.",
            "Make a square path of {dist} on each side.",
        ],
        _square,
    ),
    _t(
        "spins",
        "repeat",
        DRONE,
        ["Spin around {n} times.", "Do {n} full turns.", "Rotate in place {n} times."],
        _spins,
        heldout=True,
    ),
    _t(
        "search_photo",
        "search",
        DRONE,
        [
            "Look for the {o}; if you find it, fly to it and take a photo.",
            "Search for a {o} and photograph it if it is there.",
            "If you can find the {o}, go take a picture of it.",
        ],
        _search_photo,
    ),
    _t(
        "absent_goto",
        "absent",
        DRONE,
        ["Fly to the {o}.", "Go to the {o}.", "Find the {o} and go there."],
        _absent_goto,
    ),
    _t(
        "look_around",
        "vague",
        DRONE,
        ["Look around.", "Have a look around the room.", "Survey your surroundings.", "Check what is around you."],
        _look_around,
    ),
    _t(
        "patrol",
        "vague",
        DRONE,
        [
            "Patrol the area in a loop of {dist} legs.",
            "Do a patrol round, {dist} per leg.",
            "Guard the area: fly a loop with {dist} sides.",
        ],
        _patrol,
        heldout=True,
    ),
    _t("greet", "vague", DRONE, ["Say hello to the {o}.", "Greet the {o}.", "Go and say hi to the {o}."], _greet),
    _t(
        "zigzag",
        "multi",
        DRONE,
        [
            "Zigzag ahead {n} times: right {dist}, forward {dist}, left {dist}, forward {dist}.",
            "Fly a zigzag of {n} rounds with {dist} legs, right, forward, left, forward.",
        ],
        _zigzag,
    ),
    _t(
        "blocked",
        "error",
        DRONE,
        ["Go forward {dist}.", "Fly ahead {dist}."],
        _blocked,
        alert="ALERT: mf failed: something blocks the way at this height.",
    ),
    _t(
        "lost",
        "error",
        DRONE,
        ["Take a photo of the {o}.", "Fly to the {o} and photograph it."],
        _lost,
        alert="ALERT: g('{o}') failed: the {o} is not in view.",
    ),
    _t(
        "blurred",
        "error",
        DRONE,
        ["Take a picture of the {o}.", "Photograph the {o} again."],
        _blurred,
        heldout=True,
        alert="ALERT: the last photo was blurred by motion.",
    ),
    _t("pick", "single", ARMS, ["Pick up the {o}.", "Grab the {o}.", "Take the {o}.", "Lift the {o}."], _pick),
    _t(
        "put",
        "multi",
        ARMS,
        [
            "Put the {o} in the {p}.",
            "Place the {o} into the {p}.",
            "Move the {o} to the {p}.",
            "Could you drop the {o} in the {p}?",
        ],
        _put,
    ),
    _t(
        "put_two",
        "multi",
        ARMS,
        [
            "Put the {a} and the {b} in the {p}.",
            "Move both the {a} and the {b} to the {p}.",
            "Place the {a} and then the {b} into the {p}.",
        ],
        _put_two,
    ),
    _t(
        "clear",
        "vague",
        ARMS,
        ["Clear the table into the {p}.", "Tidy everything up into the {p}.", "Put all the objects in the {p}."],
        _clear,
    ),
    _t(
        "multi_arm",
        "multi",
        ARMS,
        ["{steps#}", "{steps:, then }.", "First {steps:, then }.", "{steps:; after that, }."],
        _multi_arm,
    ),
    _t(
        "back_and_forth",
        "repeat",
        ARMS,
        [
            "Move the {o} from the {a} to the {b} and back, {n} times.",
            "Shuttle the {o} between the {a} and the {b} {n} times.",
        ],
        _back_and_forth,
        heldout=True,
    ),
    _t(
        "arm_search_else",
        "search",
        PY_ARM,
        [
            "If there is a {o} on the table, put it in the {p}; otherwise {otherwise}.",
            "Look for the {o}. Found it? Into the {p}. Not there? Then {otherwise}.",
            "Check whether the {o} is here: if yes, place it in the {p}, if not, {otherwise}.",
        ],
        _arm_search_else,
    ),
    _t(
        "arm_search_python",
        "search",
        PY_ARM,
        [
            "Is there a {o}? If so, put it in the {p}.",
            "If the {o} is on the table, move it to the {p}.",
            "Should you find a {o}, place it in the {p}.",
        ],
        _arm_search_python,
    ),
    _t(
        "arm_search",
        "search",
        MINI_ARM,
        [
            "Is there a {o}? If so, put it in the {p}.",
            "Look for a {o} and put it in the {p} if you find one.",
            "If you can find the {o}, place it in the {p}.",
        ],
        _arm_search,
    ),
    _t(
        "holding",
        "conditional",
        PY_ARM,
        [
            "If you are holding something, put it in the {p}.",
            "Drop whatever is in the gripper into the {p}.",
            "Anything in your gripper? Then let it go in the {p}.",
            "Should the gripper be carrying something, set it down in the {p}.",
            "If the gripper holds an object, release it in the {p}.",
        ],
        _holding,
    ),
    _t(
        "slipped",
        "error",
        ARMS,
        ["Put it in the {p}.", "Try again to put the {o} in the {p}."],
        _slipped,
        alert="ALERT: the {o} slipped out of the gripper.",
    ),
    _t(
        "full",
        "error",
        ARMS,
        ["Put the {o} in the {p}.", "Store the {o} in the {p}."],
        _full,
        alert="ALERT: the {p} is full; use the {q} instead.",
    ),
    _t("absent_say", "absent", PY_ARM, ["Pick up the {o}.", "Hand me the {o}."], _arm_absent_say),
    _t(
        "wait_say",
        "single",
        MINI_ARM,
        ["Wait {s}, then say 'ready'.", "Pause for {s} and report 'ready'."],
        _arm_wait_say,
        heldout=True,
    ),
    _t("report", "single", ARMS, ["Say '{t}'.", "Report '{t}'.", "Tell the operator '{t}'."], _report),
    _t("repeat_drone", "repeat", DRONE, _REPEAT_WORDS, _repeat_drone),
    _t("repeat_arm", "repeat", ARMS, _REPEAT_WORDS, _repeat_arm),
    _t(
        "if_seen_drone",
        "search",
        DRONE,
        [
            "If you see the {o}, {steps:, then }.",
            "Check for the {o}; if it is there, {steps: and then }.",
            "Should the {o} be in view, {steps:, then }.",
            "Only if the {o} shows up: {steps: and }.",
        ],
        _if_seen_drone,
    ),
    _t(
        "if_seen_arm",
        "search",
        MINI_ARM,
        [
            "If you see the {o}, {steps:, then }.",
            "Check for the {o}; if it is there, {steps: and then }.",
            "Should the {o} be on the table, {steps:, then }.",
            "Only if the {o} shows up: {steps: and }.",
        ],
        _if_seen_arm,
    ),
    _t(
        "step_then_repeat",
        "repeat",
        DRONE,
        [
            "{a}, then {b} {n} times.",
            "First {a}; after that {b}, {n} times.",
            "{a}, and then {n} times: {b}.",
            "{a} before you {b} {n} times.",
        ],
        _step_then_repeat,
    ),
    _t("after_failure_drone", "error", DRONE, _NEW_PLAN_WORDS, _after_failure_drone, alert="{failure}"),
    _t(
        "turn_around_goto",
        "multi",
        DRONE,
        [
            "{around} and fly to the {o}.",
            "The {o} is behind you: {around}, then go to it.",
            "First {around}; then approach the {o}.",
        ],
        _turn_around_goto,
    ),
    _t(
        "behind_photo",
        "multi",
        DRONE,
        ["{around} and take a picture.", "Photograph what is behind you.", "{around}, then snap a photo."],
        _behind_photo,
    ),
    _t("question_drone", "question", DRONE, ["{q}", "Tell me: {q}", "Quick question. {q}"], _question_drone),
    _t(
        "question_arm",
        "question",
        ARMS,
        ["Is there a {o} on the table?", "Can you see a {o}?", "Tell me whether there is a {o}."],
        _question_arm,
    ),
    _t("impossible", "impossible", DRONE + ARMS, ["Please {job}.", "{job}.", "Could you {job} for me?"], _impossible),
    _t(
        "hazard_alert",
        "error",
        DRONE,
        ["{reply}", "{reply}", "Deal with it. {reply}"],
        _hazard_alert,
        alert="ALERT: {hazard}.",
    ),
    _t(
        "hazard_artifact",
        "error",
        DRONE,
        [
            "You provided me with plan {plan}, but {speaker} encountered a failure because {hazard}. "
            "Execution history: {done} {reply}",
            "The plan {plan} failed because {hazard}. Executed so far: {done} {reply}",
            "Your plan {plan} had to stop: {hazard}. Already done: {done} {reply}",
        ],
        _hazard_artifact,
        alert="[E]",
    ),
    _t(
        "hazard_request",
        "error",
        DRONE,
        ["{steps:, then }.", "{steps: and }.", "Please {steps:, then }."],
        _hazard_request,
        alert="ALERT: {Hazard}.",
    ),
    _t(
        "hazard_warning",
        "error",
        DRONE,
        ["{warn} {hazard}. {steps:, then }.", "{warn} {hazard}! {steps: and then }.", "{Hazard}. {steps:, then }."],
        _hazard_request,
        voiced=False,
    ),
    _t(
        "arm_alert",
        "error",
        ARMS,
        [
            "Carry on with the {o} and the {p}.",
            "Finish putting the {o} in the {p}.",
            "Recover and put the {o} in the {p}.",
        ],
        _arm_alert,
        alert="ALERT: {failure}.",
    ),
    _t(
        "arm_artifact",
        "error",
        MINI_ARM,
        [
            "You provided me with plan {plan}, but {speaker} encountered a failure because {failure}. "
            "Execution history: g('{o}');",
            "The plan {plan} failed because {failure}. Executed so far: g('{o}');",
        ],
        _arm_failure,
        alert="[E]",
    ),
    _t("replan_drone", "error", DRONE, ["{_text}"], _replan_drone, alert="[replan]"),
    _t("replan_arm", "error", MINI_ARM, ["{_text}"], _replan_arm, alert="[replan]"),
    _t(
        "sort_colour",
        "multi",
        ARMS,
        [
            "Sort the {kind}s by colour into the matching {holders}.",
            "Put each {kind} in the {holder} of its colour.",
            "Match every {kind} to the same-coloured {holder}.",
        ],
        _sort_colour,
    ),
    _t(
        "spatial_drone",
        "spatial",
        DRONE,
        ["Fly to {which}.", "Go to {which} and take a photo.", "Approach {which}."],
        _spatial_drone,
    ),
    _t(
        "spatial_arm",
        "spatial",
        ARMS,
        ["Put {which} in the {p}.", "Move {which} to the {p}.", "Take {which} and drop it in the {p}."],
        _spatial_arm,
    ),
    _t("after_failure_arm", "error", ARMS, _NEW_PLAN_WORDS, _after_failure_arm, alert="{failure}"),
    _t(
        "put_apart",
        "multi",
        ARMS,
        [
            "Put the {a} in the {p} and the {b} in the {q}.",
            "The {a} goes into the {p}; the {b} into the {q}.",
            "1. the {a} to the {p} 2. the {b} to the {q}",
            "Move the {a} over to the {p}, then the {b} over to the {q}.",
        ],
        _put_apart,
    ),
    _t(
        "two_groups",
        "multi",
        ARMS,
        [
            "Put {first} in the {p}, and {rest} in the {q}.",
            "Into the {p}: {first}. Into the {q}: {rest}.",
            "Sort these out: {first} belong in the {p}, {rest} in the {q}.",
        ],
        _two_groups,
    ),
    _t(
        "swap",
        "multi",
        ARMS,
        [
            "The {a} is in the {p} and the {b} is in the {q}. Swap them; the {r} is free to use meanwhile.",
            "Swap the {a} ({p}) and the {b} ({q}), parking one in the {r}.",
            "Trade places: the {a} from the {p} and the {b} from the {q}. Use the {r} as a spare spot.",
        ],
        _swap,
    ),
    _t(
        "impossible_arm",
        "impossible",
        ARMS,
        ["Please {job}.", "{job}.", "Could you {job} for me?", "I need you to {job}."],
        _impossible_arm,
    ),
]


# --------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class CorpusRow:
    id: str
    skill_set: str
    robot_type: str
    template: str
    phrasing: int
    kind: str
    split: str  # tune | heldout
    task_input: str
    task_plan: str
    required_skills: list[str]
    required_objects: list[str]
    steps: int

    def as_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


def _fill(phrasing: str, fields: dict) -> str:
    text = phrasing
    for key, value in fields.items():
        if key == "steps" and "{steps#}" in text:  # numbered: "1) rise 1 m 2) take a photo"
            text = text.replace("{steps#}", " ".join(f"{n}) {phrase}" for n, (phrase, _) in enumerate(value, 1)))
        elif key == "steps" and "{steps:" in text:
            start = text.index("{steps:")
            end = text.index("}", start)
            joiner = text[start + len("{steps:") : end]
            text = text[:start] + joiner.join(phrase for phrase, _ in value) + text[end + 1 :]
        else:
            text = text.replace("{" + key + "}", str(value))
    text = " ".join(text.split())
    return text[:1].upper() + text[1:]


def _scene(rng: random.Random, skill_set: str) -> tuple[list[str], list[str]]:
    """The scene's objects, and objects the scene lacks."""
    if skill_set == "minispec_drone":
        chosen = rng.sample(DRONE_THINGS, rng.randint(3, 6))
        absent = [o for o in DRONE_THINGS if o not in chosen]
    else:
        things = rng.sample(ARM_THINGS, rng.randint(2, 4))
        places = rng.sample(ARM_PLACES, rng.randint(2, 3))
        chosen = things + places
        rng.shuffle(chosen)
        absent = [o for o in ARM_THINGS if o not in things]
    return chosen, rng.sample(absent, 3)


def _scene_text(
    rng: random.Random,
    scene: list[str],
    instruction: str,
    alert: str,
    boxes: list[tuple[str, float, float, float]] | None = None,
) -> str:
    """The task in one of the two input styles: the project's (`Scene: [a, b]. ...`, an alert
    before it) or the artifact's with detector boxes (`Scene: [a x:.. y:.. width:.. height:..],
    Task: [A] ...`, `[E]` for an error follow-up). `boxes`: (name, x, y, width) placed on purpose."""
    if alert == "[replan]":  # the whole text is the planner's follow-up
        return instruction
    if alert == "[E]":
        return f"Scene: [{_boxes(rng, scene) if rng.random() < 0.5 else ', '.join(scene)}], Task: [E] {instruction}"
    if boxes:
        listed = ", ".join(
            f"{n} x:{x:.2f} y:{y:.2f} width:{w:.2f} height:{w * rng.uniform(0.8, 1.6):.2f}" for n, x, y, w in boxes
        )
        return f"Scene: [{listed}], Task: [A] {instruction}"
    if rng.random() < 0.7 or alert:
        return f"{alert + ' ' if alert else ''}Scene: [{', '.join(scene)}]. {instruction}".rstrip()
    return f"Scene: [{_boxes(rng, scene)}], Task: [A] {instruction}"


def _boxes(rng: random.Random, scene: list[str]) -> str:
    return ", ".join(
        f"{o} x:{rng.random():.2f} y:{rng.random():.2f} width:{rng.uniform(0.03, 0.3):.2f} "
        f"height:{rng.uniform(0.03, 0.3):.2f}"
        for o in scene
    )


def _count_steps(actions: list) -> int:
    total = 0
    for a in actions:
        if a[0] == "repeat":
            total += a[1] * _count_steps(a[2])
        elif a[0] == "for_each":
            total += len(a[1]) * _count_steps(a[2])
        elif a[0] == "if_found":
            total += 1 + _count_steps(a[2])
        elif a[0] == "if_holding":
            total += 1 + _count_steps(a[1])
        else:
            total += 1
    return total


def build_corpus(per_template: int = 50, seed: int = 0) -> list[CorpusRow]:
    """Every template, for each of its skill sets, `per_template` tasks (distinct texts),
    each checked: the plan is valid and does its task by its own needs."""
    rng = random.Random(seed)
    skill_sets = {name: load_skill_set(name) for name in SKILL_SETS}
    tokenizer = load_tokenizer()
    rows: list[CorpusRow] = []
    for template in TEMPLATES:
        for name in template.skill_sets:
            skill_set = skill_sets[name]
            seen: set[str] = set()
            attempts = written = 0
            while written < per_template:
                attempts += 1
                if attempts > per_template * 20:
                    break  # the template has fewer distinct texts than asked for
                scene, absent = _scene(rng, name)
                fields, actions = template.build(rng, scene, absent)
                phrasing = rng.randrange(len(template.phrasings))
                instruction = _fill(template.phrasings[phrasing], fields)
                if template.voiced and not template.alert:
                    instruction = lexicon.voice(rng, instruction)
                alert = _fill(template.alert, fields) if template.alert else ""
                scene = fields.get("_scene", scene)
                task_input = _scene_text(rng, scene, instruction, alert, fields.get("_boxes"))
                if task_input in seen:
                    continue
                seen.add(task_input)
                plan = render_plan(skill_set, actions)
                if len(tokenizer.encode(plan).ids) >= PLAN_TOKEN_LIMIT * skill_set.plan_token_scale:
                    continue
                needs = TaskNeeds(tuple(needed_skills(skill_set, actions)), tuple(named_objects(actions)))
                check = check_generated_plan(skill_set, task_input, plan)
                outside = check_plan(skill_set, plan, strict=True, scope=TaskScope.of_task(task_input))
                if not check.valid or outside or not check_task(skill_set, plan, needs).does_task:
                    raise AssertionError(
                        f"template {template.name} wrote a plan that fails its own checks for "
                        f"{name}: {task_input!r} {plan!r} {check.problems} {outside or ''}"
                    )
                heldout = template.heldout or (len(template.phrasings) >= 3 and phrasing == len(template.phrasings) - 1)
                rows.append(
                    CorpusRow(
                        f"{name}/{template.name}/{len(seen):03d}",
                        name,
                        SKILL_SETS[name],
                        template.name,
                        phrasing,
                        template.kind,
                        "heldout" if heldout else "tune",
                        task_input,
                        plan,
                        list(needs.skills),
                        list(needs.objects),
                        _count_steps(actions),
                    )
                )
                written += 1
    return rows


def write_corpus(rows: list[CorpusRow], path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(row.as_json() + "\n" for row in rows))


def load_corpus(path: str | Path) -> list[CorpusRow]:
    return [CorpusRow(**json.loads(line)) for line in Path(path).read_text().splitlines() if line.strip()]
