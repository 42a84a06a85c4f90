"""How people say moves, turns, distances and numbers, for the tuning corpus's templates: a
synonym list per direction, units in centimetres, metres, feet, inches and words, and the
voices an instruction may come in (terse, polite, chatty, numbered steps, lower case).

Each function takes the corpus's random generator and returns the words with the value a plan
needs (centimetres, degrees), so a template never writes a number the words do not say.
"""

from __future__ import annotations

import random

_SMALL = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def number_words(n: int) -> str:
    """0-999 in words ("one hundred twenty")."""
    if n < 20:
        return _SMALL[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _SMALL[n % 10])
    rest = n % 100
    return f"{_SMALL[n // 100]} hundred" + (f" {number_words(rest)}" if rest else "")


def number(rng: random.Random, n: int) -> str:
    return number_words(n) if rng.random() < 0.3 else str(n)


# Direction -> (adverbs after a verb of motion, verbs that carry the direction themselves).
MOVE_WORDS = {
    "forward": (["forward", "ahead", "straight ahead", "forwards", "onward"], ["advance", "push forward"]),
    "back": (["back", "backward", "backwards", "in reverse"], ["back up", "reverse", "retreat", "back off"]),
    "left": (
        ["left", "to the left", "sideways to the left", "leftward"],
        ["strafe left", "slide left", "sidestep left", "shift left"],
    ),
    "right": (
        ["right", "to the right", "sideways to the right", "rightward"],
        ["strafe right", "slide right", "sidestep right", "shift right"],
    ),
    "up": (["up", "upward", "higher"], ["climb", "ascend", "rise", "gain altitude", "go higher"]),
    "down": (
        ["down", "downward", "lower"],
        ["descend", "drop down", "sink", "lose altitude", "come down", "lower yourself"],
    ),
}
MOTION_VERBS = ["fly", "move", "go", "head", "travel", "shift", "drift"]


def distance(rng: random.Random) -> tuple[str, int]:
    """A distance as a person says it, and the centimetres a plan moves (20-500)."""
    unit = rng.random()
    if unit < 0.2:  # feet: a plan rounds to whole centimetres
        feet = rng.choice([1, 2, 3, 4, 5, 6, 8, 10])
        return f"{number(rng, feet)} {'foot' if feet == 1 else 'feet'}", round(feet * 30.48)
    if unit < 0.27:
        inches = rng.choice([12, 18, 24, 36])
        return f"{number(rng, inches)} inches", round(inches * 2.54)
    if unit < 0.5:
        metres = rng.choice([0.5, 1, 1.5, 2, 2.5, 3, 4])
        cm = round(metres * 100)
        spoken = {
            0.5: ["half a meter", "half a metre", "0.5 m"],
            1: ["one meter", "a meter", "1 m", "1 metre"],
            1.5: ["one and a half meters", "1.5 m", "a meter and a half"],
            2.5: ["two and a half meters", "2.5 meters"],
        }.get(metres)
        if spoken:
            return rng.choice(spoken), cm
        return f"{number(rng, int(metres))} {rng.choice(['meters', 'metres', 'm'])}", cm
    cm = rng.choice([20, 25, 30, 40, 50, 60, 70, 75, 80, 90, 100, 120, 150, 200, 250, 300])
    return f"{number(rng, cm)} {rng.choice(['cm', 'centimeters', 'centimetres', 'cm'])}", cm


def move_phrase(rng: random.Random, direction: str) -> tuple[str, int]:
    """'climb 2 meters', 'fly backwards 30 cm', 'back up one foot': the phrase and centimetres."""
    words, cm = distance(rng)
    adverbs, verbs = MOVE_WORDS[direction]
    if rng.random() < 0.45:
        return f"{rng.choice(verbs)} {words}", cm
    verb, adverb = rng.choice(MOTION_VERBS), rng.choice(adverbs)
    return (f"{verb} {adverb} {words}" if rng.random() < 0.6 else f"{verb} {words} {adverb}"), cm


_TURN_SIDES = {
    "cw": ["right", "clockwise", "to the right"],
    "ccw": ["left", "counterclockwise", "counter-clockwise", "anticlockwise", "to the left"],
}


def angle(rng: random.Random) -> tuple[str, int]:
    deg = rng.choice([15, 30, 45, 60, 90, 90, 120, 135, 180, 270, 360])
    spoken = {
        90: ["a quarter turn", "90°", "ninety degrees"],
        180: ["half a turn", "180 degrees"],
        360: ["a full circle", "a full turn", "360 degrees"],
        45: ["45°", "forty-five degrees"],
    }.get(deg, [])
    return rng.choice(spoken + [f"{deg} degrees", f"{deg} deg"]), deg


def turn_phrase(rng: random.Random, side: str) -> tuple[str, int]:
    """'rotate counterclockwise 45 degrees', 'turn a quarter turn to the right': phrase and degrees."""
    words, deg = angle(rng)
    verb, side_words = rng.choice(["turn", "rotate", "spin", "yaw", "swivel", "pivot"]), rng.choice(_TURN_SIDES[side])
    return (f"{verb} {side_words} {words}" if rng.random() < 0.5 else f"{verb} {words} {side_words}"), deg


TURN_AROUND = [
    "turn around",
    "face the other way",
    "look behind you",
    "turn to face behind you",
    "do an about-face",
    "spin round to face backwards",
]


def voice(rng: random.Random, instruction: str) -> str:
    """The instruction in one of the voices people write to a robot in."""
    text = instruction.rstrip(".?!")
    pick = rng.random()
    if pick < 0.45:
        return instruction
    if pick < 0.6:
        return (
            rng.choice(["Please ", "Could you ", "Can you ", "Would you kindly ", "Hey robot, ", "Okay, "])
            + text[0].lower()
            + text[1:]
            + rng.choice([".", "?", " please.", ", thanks."])
        )
    if pick < 0.7:
        return text[0].lower() + text[1:]  # terse, no full stop
    if pick < 0.8:
        return text.lower() + rng.choice(["", " pls", " asap", " now"])
    if pick < 0.9:
        return rng.choice(["Quick one: ", "Task for you: ", "Next: ", "Right, ", "So, "]) + text + "."
    return text + rng.choice([". Thanks!", ". That's all.", ", nothing else.", ". Go."])
