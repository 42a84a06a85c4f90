"""What an alert says of its hazard (where it is, or that it is close), and so the moves its
plan's first action must not make.

An error follow-up's account of what went wrong ("a wall is 20 cm ahead", "the lamp is right
above you") names where the danger is. A move that way is never a safe first action, whatever
the model writes, so the task's plan grammar leaves the skills that move that way out of the
plan's first statement (catalog/grammar.py). A skill says which way it moves in its skill set
(`moves`). Where the hazard is placed, close by or coming closer ("a person is approaching
me"), neither does a first action fly toward an object (`moves: toward`, a drone's `g`): its
way is not known, and the model tends to fly to what the alert warns of. Staying put (hover,
report, turn) stays allowed. Later statements may move any way: a recovery often resumes the
old course.

Only the account is read, not the request after it ("...ahead. Fly ahead once it is gone."),
and only phrases that place something relative to the robot: "right below you" is below,
not right; "the cat left" is no direction.
"""

from __future__ import annotations

import re

DIRECTIONS = ("forward", "backward", "left", "right", "up", "down")
TOWARD = "toward"  # a skill's `moves`: toward its object argument

_ME = r"(?:you|me|the (?:drone|robot|arm|propellers?|props|gripper|camera)|your \w+|my \w+)"
_PLACES = {
    "forward": [r"(?<!go )\bahead\b", r"\bin front\b", r"\bin (?:your|my) path\b"],
    "backward": [rf"\bbehind {_ME}", r"\bfrom behind\b", r"\bat (?:your|my) back\b"],
    "left": [r"\b(?:on|to|from|at) (?:your|my|the|its) left\b", r"\bleft(?:-hand)? side\b", rf"\bleft of {_ME}"],
    "right": [r"\b(?:on|to|from|at) (?:your|my|the|its) right\b", r"\bright(?:-hand)? side\b", rf"\bright of {_ME}"],
    "up": [r"\babove\b", r"\boverhead\b", rf"\bover {_ME}"],
    "down": [r"\bbelow\b", r"\bbeneath\b", r"\bunderneath\b", rf"\bunder {_ME}"],
}
_PLACE_PATTERNS = {d: re.compile("|".join(p), re.IGNORECASE) for d, p in _PLACES.items()}
_UNIT = r"(?:cm|mm|m|centimet(?:er|re)s?|met(?:er|re)s?|inch(?:es)?|feet|foot|ft)"
# A hazard close by or coming closer, from no given side.
_NEAR = re.compile(
    "|".join(
        [
            r"\bapproach(?:es|ing)\b",
            rf"\b(?:coming|heading|flying|running|diving|moving)(?: straight)? (?:at|toward|towards) {_ME}",
            rf"\b\d+(?:\.\d+)? ?{_UNIT} (?:from|of) {_ME}",
            rf"\b(?:too )?close to {_ME}",
        ]
    ),
    re.IGNORECASE,
)

# Where a follow-up's account ends: the calls already run, then maybe a request.
_HISTORY = re.compile(
    r"\b(?:execution history|history|executed so far|already executed|already done|done so far|what ran"
    r"|calls completed|original request)\s*:",
    re.IGNORECASE,
)
_CALL = re.compile(r"\b\w+\((?:[^()]|\([^()]*\))*\)")
_ALERT = re.compile(r"^\s*ALERT\s*:?\s*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def alert_account(instruction: str) -> str:
    """The part of an error follow-up that says what went wrong: an `ALERT:` text's first
    sentence; otherwise the text before its execution history, plans left out."""
    alert = _ALERT.match(instruction)
    if alert:
        account = _SENTENCE_END.split(instruction[alert.end() :], maxsplit=1)[0]
    else:
        account = _HISTORY.split(instruction, maxsplit=1)[0]
    return _CALL.sub(" ", account)


def hazard_directions(instruction: str) -> tuple[str, ...]:
    """The directions (of `DIRECTIONS`) in which the follow-up places a hazard, in that order."""
    account = alert_account(instruction)
    return tuple(d for d in DIRECTIONS if _PLACE_PATTERNS[d].search(account))


def unsafe_first_moves(instruction: str) -> tuple[str, ...]:
    """The ways (`moves` values) a first action must not move: toward each place the follow-up
    gives a hazard and, if it tells of one near or coming closer, toward any object (which way
    that goes is not known)."""
    places = hazard_directions(instruction)
    return (*places, TOWARD) if places or _NEAR.search(alert_account(instruction)) else ()
