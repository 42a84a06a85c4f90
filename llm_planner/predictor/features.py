"""Features of a task's text that bear on how long its plan will be, in the RT-LM way: scores
for multi-part instructions, structural, syntactic and semantic (vague) ambiguity,
open-endedness, and input length, plus the robot's skill set.

Computed by rules over the instruction (scene list removed, `catalog/scene.py`), with word
lists of this project. An NLP library would add little here: spaCy installs from PyPI, but its
trained English pipelines (en_core_web_sm) are published on GitHub, not on the package
registries (PyPI only has third-party re-uploads), so the rules below are the documented
fallback: a regex tokenizer and lexicons.
"""

from __future__ import annotations

import re
from dataclasses import astuple, dataclass, fields

from llm_planner.catalog.scene import parse_task_text

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+(?:\.\d+)?")
ACTION_VERBS = frozenset(
    [
        "fly",
        "go",
        "move",
        "climb",
        "rise",
        "descend",
        "turn",
        "rotate",
        "take",
        "photograph",
        "film",
        "hover",
        "wait",
        "land",
        "approach",
        "back",
        "pick",
        "put",
        "place",
        "drop",
        "stack",
        "sort",
        "tidy",
        "clear",
        "collect",
        "bring",
        "hand",
        "push",
        "grab",
        "release",
        "report",
        "say",
        "tell",
        "log",
        "find",
        "search",
        "scan",
        "look",
        "check",
        "get",
        "show",
        "patrol",
        "return",
        "come",
        "follow",
        "avoid",
    ]
)
SEQUENCE_WORDS = frozenset(
    ["then", "next", "after", "afterwards", "finally", "first", "second", "third", "last", "before"]
)
VAGUE_WORDS = frozenset(
    [
        "around",
        "some",
        "somewhere",
        "something",
        "bit",
        "little",
        "better",
        "quick",
        "quickly",
        "nearby",
        "about",
        "roughly",
        "tidy",
        "clean",
        "everything",
        "anything",
        "stuff",
        "area",
        "good",
        "safe",
    ]
)
OPEN_ENDED = frozenset(
    ["find", "search", "scan", "look", "until", "whether", "explore", "patrol", "if", "unless", "while"]
)
PRONOUNS = frozenset(["it", "them", "they", "there", "its", "that", "this", "those", "these"])
PREPOSITIONS = frozenset(
    ["in", "on", "into", "onto", "to", "from", "with", "next", "near", "behind", "under", "above", "over", "by", "at"]
)
COUNTS = {"twice": 2, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "times": 0}


@dataclass(frozen=True)
class TaskFeatures:
    words: float  # input length (instruction words)
    scene_objects: float
    objects_named: float  # scene objects the instruction names
    action_verbs: float  # multi-part: how many actions are asked for
    sequence_words: float  # then, finally, ...
    conjunctions: float  # 'and' and commas
    enumerated: float  # "1) ... 2) ..." items
    numbers: float
    repeat_count: float  # "four directions", "twice"
    vagueness: float  # semantic ambiguity
    open_endedness: float  # search / conditional words
    pronouns: float  # syntactic ambiguity (what does "it" refer to)
    attachments: float  # structural ambiguity: prepositional phrases per verb
    error_follow_up: float

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    def vector(self) -> list[float]:
        return list(astuple(self))


def task_features(task_text: str) -> TaskFeatures:
    task = parse_task_text(task_text)
    text = task.instruction.lower()
    words = _WORD.findall(text)
    verbs = sum(w in ACTION_VERBS for w in words)
    named = sum(1 for o in task.object_names if re.search(rf"(?<!\w){re.escape(o.lower())}(?!\w)", text))
    counts = [COUNTS[w] for w in words if w in COUNTS] + [
        int(m.group(1)) for m in re.finditer(r"\b(\d) (?:directions|times|photos|pictures|sides)", text)
    ]
    return TaskFeatures(
        words=float(len(words)),
        scene_objects=float(len(task.objects)),
        objects_named=float(named),
        action_verbs=float(verbs),
        sequence_words=float(sum(w in SEQUENCE_WORDS for w in words)),
        conjunctions=float(words.count("and") + text.count(",")),
        enumerated=float(len(re.findall(r"(?:^|\s)\d\)", text))),
        numbers=float(sum(w[0].isdigit() for w in words)),
        repeat_count=float(max(counts, default=0)),
        vagueness=float(sum(w in VAGUE_WORDS for w in words)),
        open_endedness=float(sum(w in OPEN_ENDED for w in words)),
        pronouns=float(sum(w in PRONOUNS for w in words)),
        attachments=float(sum(w in PREPOSITIONS for w in words)) / max(1, verbs),
        error_follow_up=float(task.error_follow_up),
    )
