"""The scene a task's text describes, in the two input styles the planner accepts:

project   `Scene: [desk, laptop, bottle]. Find the bottle.` (also `Objects: ['apple', 'bowl']`)
artifact  `Scene: [bolt x:0.21 y:0.33 width:0.02 height:0.05, bin x:0.80 ...], Task: [A] ...`
          (the TimelyLLM artifact's style; `[E]` marks an error follow-up)

`parse_task_text` splits such a text into its objects (with their box, when given), the
instruction proper, and whether it is an error follow-up. Prompts render the objects in one
form the model sees in its examples; plan checks test that a plan's calls name them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SCENE_LIST = re.compile(r"\b(?:Scene|Objects)\s*:\s*\[([^\]]*)\]\s*[.,]?\s*", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"\s+([a-z_]+)\s*:\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_TASK_TAG = re.compile(r"\bTask\s*:\s*(?:\[([A-Z])\]\s*)?", re.IGNORECASE)
ALERT_MARK = re.compile(r"^\s*ALERT\b", re.IGNORECASE)


@dataclass(frozen=True)
class SceneObject:
    name: str
    attributes: dict[str, float] = field(default_factory=dict)  # x, y, width, height when given


@dataclass(frozen=True)
class TaskText:
    objects: tuple[SceneObject, ...]
    instruction: str  # the text without the scene list (and without `Task: [A]`)
    error_follow_up: bool  # `[E]` or an `ALERT:` text

    @property
    def object_names(self) -> list[str]:
        return [o.name for o in self.objects]

    def names_object(self, name: str) -> bool:
        """True if `name` is one of the scene's objects or a word group of the instruction."""
        key = name.strip().lower()
        if not key:
            return False
        if any(key == o.name.lower() for o in self.objects):
            return True
        return re.search(rf"(?<!\w){re.escape(key)}(?!\w)", self.instruction.lower()) is not None


def _scene_object(item: str) -> SceneObject | None:
    item = item.strip().strip("'\"").strip()
    if not item:
        return None
    attributes = {m.group(1).lower(): float(m.group(2)) for m in _ATTRIBUTE.finditer(" " + item)}
    name = _ATTRIBUTE.split(" " + item, maxsplit=1)[0].strip().strip("'\"")
    return SceneObject(name, attributes) if name else None


def parse_task_text(text: str) -> TaskText:
    objects: list[SceneObject] = []
    match = SCENE_LIST.search(text)
    rest = text
    if match:
        objects = [o for o in (_scene_object(i) for i in match.group(1).split(",")) if o is not None]
        rest = text[: match.start()] + text[match.end() :]
    tag = _TASK_TAG.search(rest)
    error = ALERT_MARK.match(text) is not None
    if tag:
        error = error or (tag.group(1) or "").upper() == "E"
        rest = rest[: tag.start()] + rest[tag.end() :]
    return TaskText(tuple(objects), " ".join(rest.split()), error)


def place_words(obj: SceneObject, scene: tuple[SceneObject, ...]) -> list[str]:
    """Where an object with a box is, in words: left / centre / right (x), far / near (y: the
    image's top is far), and large / small against the scene's median box area."""
    at = obj.attributes
    words = []
    if "x" in at:
        words.append("left" if at["x"] < 1 / 3 else "right" if at["x"] > 2 / 3 else "centre")
    if "y" in at and not 0.4 <= at["y"] <= 0.6:
        words.append("far" if at["y"] < 0.4 else "near")
    areas = sorted(
        o.attributes["width"] * o.attributes["height"] for o in scene if {"width", "height"} <= o.attributes.keys()
    )
    if len(areas) >= 2 and {"width", "height"} <= at.keys():
        median, area = areas[len(areas) // 2], at["width"] * at["height"]
        words += ["large"] if area >= 2 * median else ["small"] if area <= median / 2 else []
    return words


def render_task(text: str) -> str:
    """A task in the one form the model reads, whichever style it came in: the scene's objects
    as quoted names (the form a plan writes them in), each with its place in words where the
    scene gives boxes, then the instruction. Few-shot examples are rendered the same way, so the
    model copies names from the Objects line."""
    task = parse_task_text(text)
    lines = []
    if task.objects:

        def rendered(obj: SceneObject) -> str:
            where = place_words(obj, task.objects)
            return f"'{obj.name}'" + (f" ({', '.join(where)})" if where else "")

        lines.append("Objects: " + ", ".join(rendered(o) for o in task.objects))
    # An error follow-up reads as an alert whichever style marked it (`[E]` or `ALERT:`): the
    # form the tuned model learned its follow-ups in.
    alert = "ALERT: " if task.error_follow_up and not ALERT_MARK.match(task.instruction) else ""
    lines.append(f"Task: {alert}{task.instruction}")
    return "\n".join(lines)
