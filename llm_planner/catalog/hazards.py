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

A warning in plain words is an alert too where it opens with a word of warning ("Careful:",
"Watch out,", "Oops") and its first sentence after that, a statement, places a hazard or
tells of one close by ("Look out! a dog is below you. Climb 1 m."). A text that only says where
something is ("The cup is on your left. Fly to it.") or asks for something after the word
("Careful: put it on your left.") is a task, not a warning.

Only the account is read, not the request after it ("...ahead. Fly ahead once it is gone."),
and only phrases that place something relative to the robot: "right below you" is below,
not right; "the cat left" is no direction. Where the robot is the subject ("you are 20 cm
below the ceiling"), the hazard is the other way.
"""

from __future__ import annotations

import re

from llm_planner.catalog.scene import ALERT_MARK, SCENE_LIST, parse_task_text

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
# A skill call quoted in a task's text (an `[E]` follow-up's plan and history), one level of nesting.
QUOTED_CALL = re.compile(r"\b\w+\((?:[^()]|\([^()]*\))*\)")
_ALERT_SEPARATOR = re.compile(r"^\s*[:!]?\s*")
# The words a warning in plain words opens with, set off by punctuation ("Stop -", not "Stop at").
_WARNING_CUE = re.compile(
    r"^\s*(?:careful|caution|watch out|look out|mind out|danger|warning|heads[- ]up|stop|oops|uh[- ]oh|problem)"
    r"\s*[:,;!.\-]+\s*",
    re.IGNORECASE,
)
# A warning's account says how things are; a request after the word of warning does not.
_STATEMENT = re.compile(r"\b(?:is|are|was|were|am)\b|'(?:s|re|m)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLAUSE = re.compile(r"[,;:]|\band\b|\bbut\b|(?<=[.!?])\s+", re.IGNORECASE)
# A clause in which the robot is where it is: "you are 20 cm below the ceiling".
_ROBOT_SUBJECT = re.compile(r"^\s*(?:you|i|the (?:drone|robot))\s*(?:'re|'m|are|am|is|were|was)\b", re.IGNORECASE)
# Where, in such a clause, the robot is relative to the hazard -> the way the hazard lies.
_ROBOT_PLACES = {
    "forward": [r"\bbehind\b", r"(?<!go )\bahead\b", r"\bin front\b(?! of)"],
    "backward": [r"\bin front of\b"],
    "left": [r"\bright of\b"],
    "right": [r"\bleft of\b"],
    "up": [r"\bbelow\b", r"\bunder(?:neath)?\b", r"\bbeneath\b", r"\boverhead\b"],
    "down": [r"\babove\b", r"\bover\b", r"\bon top of\b"],
}
_ROBOT_PLACE_PATTERNS = {d: re.compile("|".join(p), re.IGNORECASE) for d, p in _ROBOT_PLACES.items()}


def alert_account(text: str) -> str:
    """The part of an error follow-up (a task's whole text) that says what went wrong: an
    `ALERT:` text up to its scene list (without one, its first sentence); a warning in plain
    words, its first sentence after the word of warning; otherwise the instruction before its
    execution history. Plans are left out."""
    alert = ALERT_MARK.match(text)
    if alert:
        rest = _ALERT_SEPARATOR.sub("", text[alert.end() :], count=1)
        scene = SCENE_LIST.search(rest)
        account = rest[: scene.start()] if scene else _SENTENCE_END.split(rest, maxsplit=1)[0]
    else:
        task = parse_task_text(text)
        account = _warning_account(task.instruction) if not task.error_follow_up else None
        if account is None:
            account = _HISTORY.split(task.instruction, maxsplit=1)[0]
    return QUOTED_CALL.sub(" ", account)


def _warning_account(instruction: str) -> str | None:
    cue = _WARNING_CUE.match(instruction)
    return _SENTENCE_END.split(instruction[cue.end() :], maxsplit=1)[0] if cue else None


def is_warning(text: str) -> bool:
    """Whether a task (its whole text) is a warning in plain words: it opens with a word of
    warning and its first sentence after it, a statement, places a hazard or tells of one close
    by."""
    task = parse_task_text(text)
    if task.error_follow_up:  # `ALERT:` or `[E]`: an alert already
        return False
    account = _warning_account(task.instruction)
    return account is not None and bool(_STATEMENT.search(account)) and bool(_unsafe_moves(account))


def hazard_directions(text: str) -> tuple[str, ...]:
    """The directions (of `DIRECTIONS`) in which the follow-up places a hazard, in that order."""
    return _directions_in(alert_account(text))


def _directions_in(account: str) -> tuple[str, ...]:
    found = set()
    for clause in _CLAUSE.split(account):
        patterns = _ROBOT_PLACE_PATTERNS if _ROBOT_SUBJECT.match(clause) else _PLACE_PATTERNS
        found |= {d for d in DIRECTIONS if patterns[d].search(clause)}
    return tuple(d for d in DIRECTIONS if d in found)


def unsafe_first_moves(text: str) -> tuple[str, ...]:
    """The ways (`moves` values) a first action must not move: toward each place the follow-up
    (a task's whole text) gives a hazard and, if it tells of one near or coming closer, toward
    any object (which way that goes is not known)."""
    return _unsafe_moves(alert_account(text))


def _unsafe_moves(account: str) -> tuple[str, ...]:
    places = _directions_in(account)
    return (*places, TOWARD) if places or _NEAR.search(account) else ()
