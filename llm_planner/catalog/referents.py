"""Which of several numbered objects of one kind a task means, where its words single one out by
place or size: "the cup on the left", "the larger of the two boxes", "the bottle nearest to
you", "the rightmost can".

A detector names objects of one kind `cup_1`, `cup_2`, ... and gives each a box (x, y, width,
height; the image's top is far from the robot). A small model reads the boxes' places in words
but still often picks the wrong one of two. The boxes settle such a reference, so the task's
plan grammar leaves the others of that kind out of what a plan may name (catalog/grammar.py).

It is cautious: a kind is narrowed only where every mention of it in the instruction carries
a place or size word that picks one object, and nothing is narrowed in an instruction that
negates or excepts ("not", "don't", "except", "instead of", ...). "All three cups", "both
boxes" or `cup_2` by name leave every cup to the plan.
"""

from __future__ import annotations

import re

from llm_planner.catalog.scene import SceneObject, TaskText

_NUMBERED = re.compile(r"^(.+?)_\d+$")  # `cup_1` -> `cup`

# Each word's axis and end: x grows to the right, y toward the robot ("near"), size with the
# box's area; "mid" is the middle one on x.
_LOW, _HIGH, _MID = "low", "high", "mid"
_WORDS: dict[str, tuple[str, str]] = {}
for _axis, _end, _names in [
    ("x", _LOW, "left leftmost left-most lefthand left-hand"),
    ("x", _HIGH, "right rightmost right-most righthand right-hand"),
    ("x", _MID, "middle centre center central"),
    ("y", _HIGH, "near nearer nearest closer closest front frontmost front-most"),
    ("y", _LOW, "far farther farthest further furthest distant back rear rearmost"),
    ("size", _HIGH, "big bigger biggest large larger largest huge"),
    ("size", _LOW, "small smaller smallest little littlest tiny tinier tiniest"),
]:
    _WORDS.update({w: (_axis, _end) for w in _names.split()})


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that may stand between a place word and the noun it describes ("the rightmost of the
# three bottles", "the left one").
_BETWEEN = _words("of the two three four five both")
# After a noun, a place word belongs to it through a short link ("the cup that is on the
# left", "the block closest to you", "the pen at the far end").
_LINK = _words("that that's which is sits stands lies one on to at in the your my its most away from")
# Words that need a preposition before them to be a place after a noun: "right" as in "right
# now", "back" as in "put it back", "front" as in "front door".
_AFTER_NEEDS_THE = _words("left right back front middle centre center")
# What may stand before such a word: "on the left", "to your right", "furthest right".
_BEFORE_SIDE = _words("the your my its most far farther farthest further furthest")
_NEGATION = re.compile(
    r"\b(?:not|never|don't|dont|do not|doesn't|isn't|except|other than|instead of|avoid|without|but)\b|n't\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z][a-z0-9_'-]*")


def _plurals(kind: str) -> set[str]:
    forms = {kind, kind + "s", kind + "es"}
    if kind.endswith("y"):
        forms.add(kind[:-1] + "ies")
    if kind.endswith("f"):
        forms.add(kind[:-1] + "ves")
    if kind.endswith("fe"):
        forms.add(kind[:-2] + "ves")
    return forms


def _value(obj: SceneObject, axis: str) -> float:
    at = obj.attributes
    return at["width"] * at["height"] if axis == "size" else at[axis]


def _extreme(group: list[SceneObject], axis: str, end: str) -> str | None:
    """The object at one end of `axis`, or None on a tie. Size is the box's area; where the
    widest box is not the one of largest area (or the narrowest not the smallest), "bigger"
    is a matter of opinion."""
    ends = []
    for key in ("size", "width") if axis == "size" else (axis,):
        values = sorted((_value(obj, key), obj.name) for obj in group)
        first, second = (values[-1], values[-2]) if end == _HIGH else (values[0], values[1])
        if first[0] == second[0]:
            return None
        ends.append(first[1])
    return ends[0] if len(set(ends)) == 1 else None


def _pick(group: list[SceneObject], cues: list[tuple[str, str]]) -> str | None:
    """The one object of `group` that every cue singles out, or None."""
    picked = set()
    for axis, end in cues:
        if end == _MID:
            if len(group) % 2 == 0:
                return None
            ranked = sorted(group, key=lambda o: _value(o, "x"))
            values = [_value(o, "x") for o in ranked]
            if len(set(values)) < len(values):
                return None
            picked.add(ranked[len(ranked) // 2].name)
            continue
        name = _extreme(group, axis, end)
        if name is None:
            return None
        picked.add(name)
    return picked.pop() if len(picked) == 1 else None


def _cues_before(words: list[str], at: int) -> list[tuple[str, str]]:
    """Place words in the noun phrase before the noun at `at` ("the larger of the two boxes")."""
    cues, i = [], at - 1
    while i >= 0 and at - i <= 6:
        word = words[i]
        if word in _WORDS:
            cues.append(_WORDS[word])
        elif word not in _BETWEEN:
            break
        i -= 1
    return cues


def _cues_after(words: list[str], at: int, nouns: set[int]) -> list[tuple[str, str]]:
    """Place words linked to the noun at `at` after it ("the bottle on the right"), up to the
    next noun that could take them instead."""
    cues = []
    for i in range(at + 1, min(at + 8, len(words))):
        word = words[i]
        if i in nouns:
            break
        if word in _WORDS:
            if i + 1 in nouns or i + 1 < len(words) and words[i + 1] in ("one", "ones"):
                break  # it describes the next noun ("the cup on the left saucer")
            if word in _AFTER_NEEDS_THE and words[i - 1] not in _BEFORE_SIDE:
                break
            cues.append(_WORDS[word])
        elif word not in _LINK:
            break
    # "furthest left": a far-word before a side is the side's superlative.
    return [c for j, c in enumerate(cues) if not (c[0] == "y" and j + 1 < len(cues) and cues[j + 1][0] == "x")]


def unmeant(task: TaskText) -> frozenset[str]:
    """The numbered scene objects the instruction's place and size words rule out."""
    groups: dict[str, list[SceneObject]] = {}
    for obj in task.objects:
        match = _NUMBERED.match(obj.name)
        if match and {"x", "y", "width", "height"} <= obj.attributes.keys():
            groups.setdefault(match.group(1).lower(), []).append(obj)
    groups = {kind: group for kind, group in groups.items() if len(group) >= 2}
    if not groups or _NEGATION.search(task.instruction):
        return frozenset()
    words = _WORD.findall(task.instruction.lower())
    forms = {kind: _plurals(kind.split()[-1]) for kind in groups}
    if len(groups) == 1:  # "the left one" can only mean that kind
        next(iter(forms.values())).update({"one", "ones"})
    mentions = {kind: [i for i, w in enumerate(words) if w in forms[kind]] for kind in groups}
    nouns = {i for found in mentions.values() for i in found}
    ruled_out: set[str] = set()
    for kind, group in groups.items():
        if not mentions[kind]:
            continue
        meant = set()
        for i in mentions[kind]:
            cues = _cues_before(words, i) + _cues_after(words, i, nouns)
            name = _pick(group, cues) if cues else None
            if name is None:
                break
            meant.add(name)
        else:
            ruled_out |= {o.name for o in group} - meant
    return frozenset(ruled_out)
