"""Incremental segmenter: fed generated text token by token, it reports each point where the
output holds a complete executable statement that contains a skill call.

What counts as executable (TypeFly's rule: a statement is ready once it is syntactically
complete):

MiniSpec  A statement ends at `;` outside quotes, parentheses and braces, or at the `}` that
          closes a top-level loop `N{...}` or conditional `?cond{...}`. A loop or conditional
          is therefore sent whole, once its closing brace arrives; its header alone is never a
          segment. Text inside '...' or "..." never ends a statement.
Python    A logical line ends at a newline outside brackets and strings. A line ending in `:`
          opens a block (`for`, `if`, `while`, `def`, ...) that is complete when the next
          line starting at column 0 is not `else`/`elif`/`except`/`finally`.

A completed statement without a skill call (an assignment, a comment, `;`) is kept and sent
with the next statement that has one, so the concatenated segments always equal the output.
`flush()` at the end of generation returns whatever is left as the final segment.
Each `feed` scans only the new text; a statement is matched against the skill regexes once,
when it completes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_planner.catalog.skills import SkillSet
from llm_planner.domain.calls import SkillCall

_BLOCK_CONTINUATIONS = frozenset({"else", "elif", "except", "finally"})


@dataclass
class Segment:
    index: int
    text: str
    calls: list[SkillCall] = field(default_factory=list)

    @property
    def call_texts(self) -> list[str]:
        return [c.text for c in self.calls]


class Segmenter:
    """Base: collects completed statements into segments. Subclasses scan characters."""

    def __init__(self, skill_set: SkillSet) -> None:
        self.skill_set = skill_set
        self._prefix: list[str] = []  # completed statements of the pending segment, no call yet
        self._next_index = 0
        self._quote: str | None = None  # the open string literal's quote character
        self._escaped = False

    def _in_string(self, ch: str) -> bool:
        """Track '...' and "..." literals: True if `ch` is inside one (or closes it)."""
        if self._quote is None:
            return False
        if self._escaped:
            self._escaped = False
        elif ch == "\\":
            self._escaped = True
        elif ch == self._quote:
            self._quote = None
        return True

    def feed(self, text: str) -> list[Segment]:
        raise NotImplementedError

    def _pending_tail(self) -> str:
        raise NotImplementedError

    def _statement_done(self, statement: str, out: list[Segment]) -> None:
        calls = self.skill_set.find_calls(statement)
        if not calls:
            self._prefix.append(statement)
            return
        out.append(self._emit(statement, calls))

    def _emit(self, statement: str, calls: list[SkillCall]) -> Segment:
        prefix = "".join(self._prefix)
        self._prefix.clear()
        if prefix:
            shift = len(prefix)
            calls = [SkillCall(c.skill, c.text, c.start + shift, c.end + shift) for c in calls]
        segment = Segment(self._next_index, prefix + statement, calls)
        self._next_index += 1
        return segment

    def flush(self) -> Segment | None:
        """End of generation: everything not yet sent, as the final segment (None if empty)."""
        tail = self._pending_tail()
        if not tail and not self._prefix:
            return None
        return self._emit(tail, self.skill_set.find_calls(tail))


class MiniSpecSegmenter(Segmenter):
    def __init__(self, skill_set: SkillSet) -> None:
        super().__init__(skill_set)
        self._statement: list[str] = []
        self._parens = 0
        self._braces = 0

    def feed(self, text: str) -> list[Segment]:
        out: list[Segment] = []
        start = 0
        for j, ch in enumerate(text):
            if self._in_string(ch):
                continue
            if ch == "'" or ch == '"':
                self._quote = ch
            elif ch == "(":
                self._parens += 1
            elif ch == ")":
                self._parens = max(0, self._parens - 1)
            elif ch == "{":
                self._braces += 1
            elif ch == "}" or (ch == ";" and self._braces == 0):
                if ch == "}":
                    self._braces = max(0, self._braces - 1)
                if self._braces == 0 and self._parens == 0:
                    self._statement.append(text[start : j + 1])
                    start = j + 1
                    statement = "".join(self._statement)
                    self._statement.clear()
                    self._statement_done(statement, out)
        if start < len(text):
            self._statement.append(text[start:])
        return out

    def _pending_tail(self) -> str:
        tail = "".join(self._statement)
        self._statement.clear()
        return tail


class PythonSegmenter(Segmenter):
    def __init__(self, skill_set: SkillSet) -> None:
        super().__init__(skill_set)
        self._statement: list[str] = []  # completed lines of the current statement/block
        self._line: list[str] = []
        self._comment = False
        self._depth = 0
        self._in_block = False
        self._line_has_code = False
        self._last_code_char = ""
        self._word: str | None = None  # first word of a column-0 line inside a block

    def feed(self, text: str) -> list[Segment]:
        out: list[Segment] = []
        for ch in text:
            if self._word is not None:
                if ch.isalnum() or ch == "_":
                    self._word += ch
                    self._line.append(ch)
                    continue
                self._decide_block_end(out)
            self._line.append(ch)
            if self._comment:
                if ch == "\n":
                    self._comment = False
                    self._end_line(out)
                continue
            if self._in_string(ch):
                continue
            if ch == "\n":
                if self._depth == 0:
                    self._end_line(out)
                continue
            if ch in " \t\r":
                continue
            if not self._line_has_code:
                self._line_has_code = ch != "#"
                if self._in_block and len(self._line) == 1:
                    # A column-0 line in a block: its first word decides whether the block ended.
                    if ch.isalpha() or ch == "_":
                        self._word = ch
                        self._last_code_char = ch
                        continue
                    self._word = ""
                    self._decide_block_end(out)
            if ch == "#":
                self._comment = True
            elif ch == "'" or ch == '"':
                self._quote = ch
            elif ch in "([{":
                self._depth += 1
            elif ch in ")]}":
                self._depth = max(0, self._depth - 1)
            self._last_code_char = ch
        return out

    def _decide_block_end(self, out: list[Segment]) -> None:
        word, self._word = self._word, None
        if word in _BLOCK_CONTINUATIONS:
            return
        block = "".join(self._statement)
        self._statement.clear()
        self._in_block = False
        self._statement_done(block, out)

    def _end_line(self, out: list[Segment]) -> None:
        line = "".join(self._line)
        self._line.clear()
        has_code, self._line_has_code = self._line_has_code, False
        self._statement.append(line)
        if self._in_block or not has_code:
            return
        if self._last_code_char == ":":
            self._in_block = True
            return
        statement = "".join(self._statement)
        self._statement.clear()
        self._statement_done(statement, out)

    def _pending_tail(self) -> str:
        tail = "".join(self._statement) + "".join(self._line)
        self._statement.clear()
        self._line.clear()
        return tail


def make_segmenter(skill_set: SkillSet) -> Segmenter:
    if skill_set.syntax == "minispec":
        return MiniSpecSegmenter(skill_set)
    if skill_set.syntax == "python":
        return PythonSegmenter(skill_set)
    raise ValueError(f"no segmenter for syntax {skill_set.syntax!r}")


def split_segments(skill_set: SkillSet, text: str) -> list[Segment]:
    """Segments of a complete plan (all at once), as the streaming segmenter would cut them."""
    segmenter = make_segmenter(skill_set)
    segments = segmenter.feed(text)
    last = segmenter.flush()
    if last is not None:
        segments.append(last)
    return segments
