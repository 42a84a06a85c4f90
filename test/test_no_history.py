"""The project speaks of itself as it is now: no tracked file or folder name, and no line of
the README, docs, code, tests, data or saved benchmark output, carries labels of rounds of
work, tracker numbers or first person. History belongs in commit messages. It also stands
alone: no line sends the reader to notes kept outside the repository."""

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HISTORY = re.compile(r"\bsessions?\s+\d|\b(?:this|previous|last|next|earlier|later)\s+(?:session|round)s?\b"
                     r"|\bissues?\s*#?\d|\brounds?\s+of\s+work\b", re.IGNORECASE)
FIRST_PERSON = [re.compile(r"\b(?:we|our|ours)\b", re.IGNORECASE), re.compile(r"(?<![\w/'\"`.-])I(?![\w/'\"`-])")]
OUTSIDE_NOTES = re.compile(r"\bshared/(?:notes\b|DESIGN\.md)")
HISTORY_NAME = re.compile(r"issue\d|session\d", re.IGNORECASE)
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()  # it spells the patterns out


def tracked_files() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [name for name in listed.stdout.splitlines() if name != THIS_FILE]


def text_of(name: str) -> str | None:
    data = (ROOT / name).read_bytes() if (ROOT / name).is_file() else b""
    if b"\0" in data:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


# Task files, and the plan benchmark's reports that quote them, hold instructions in the voices
# of operators and robots ("...but I encountered a failure"): first person there is the data,
# not the project speaking of itself.
TASK_TEXTS = re.compile(r"^(?:config/(?:(?:tuning|evaluation|corpus)/[^/]+\.jsonl|traces/[^/]+\.yaml)"
                        r"|docs/results/plans/[^/]+\.(?:json|md))$")


def offending_lines(text: str, first_person: bool = True) -> list[tuple[int, str]]:
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if HISTORY.search(line) or (first_person and any(pattern.search(line) for pattern in FIRST_PERSON))]


def tracked_lines_where(lines_of: Callable[[str, str], list[tuple[int, str]]]) -> list[str]:
    """`file:line: text` of every tracked text file's lines that `lines_of` picks from its name and text."""
    found = []
    for name in tracked_files():
        text = text_of(name)
        if text is not None:
            found += [f"{name}:{number}: {line[:120]}" for number, line in lines_of(name, text)]
    return found


def outside_notes_lines(text: str) -> list[tuple[int, str]]:
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if OUTSIDE_NOTES.search(line)]


def test_no_tracked_name_is_a_round_of_work_or_a_tracker_number():
    assert [name for name in tracked_files() if HISTORY_NAME.search(name)] == []


def test_no_tracked_line_speaks_of_rounds_of_work_tracker_numbers_or_in_the_first_person():
    assert tracked_lines_where(lambda name, text: offending_lines(text, not TASK_TEXTS.match(name))) == []


def test_no_tracked_line_cites_notes_outside_the_repository():
    assert tracked_lines_where(lambda name, text: outside_notes_lines(text)) == []


def phrase(*words: str) -> str:
    """A phrase the check must catch, put together here so that no file holds it whole."""
    return " ".join(words)


@pytest.mark.parametrize("line", [
    phrase("Measured in", "sess" "ion 12", "on the AVX2 host."), phrase("As the", "prev" "ious sess" "ion", "found,"),
    phrase("See", "iss" "ue 16."), phrase("Fixed for", "iss" "ue #7"), phrase("sess" "ions 6-7", "changed it"),
    phrase("I", "could not pin it down."), phrase("O" "ur", "executor is faster."), phrase("what", "w" "e", "measured"),
    phrase("the next", "round" " of", "work")])
def test_the_check_catches_each_kind(line):
    assert offending_lines(line) != []


@pytest.mark.parametrize("line", ["as collected in " + "shared/" "notes/figures.md", "See ../" "shared/" "DESIGN.md"])
def test_the_outside_notes_check_catches_a_citation(line):
    assert outside_notes_lines(line) != []


def test_the_outside_notes_check_leaves_shared_memory_alone():
    assert outside_notes_lines("a shared/ folder of results, shared memory") == []


@pytest.mark.parametrize("line", [
    "the previous segment's end", "ros2/rclpy#1532 fixed it upstream", "I/O bound", "round 1 of 2",
    "a session-free protocol", "an issue with the clock"])
def test_the_check_leaves_ordinary_words_alone(line):
    assert offending_lines(line) == []
