"""Incremental segmenter: fed generated text token by token, it reports each point where the
output holds a complete executable statement that contains a skill call.

What counts as executable (TypeFly's rule: a statement is ready once it is syntactically
complete):

MiniSpec  A statement ends at `;` outside quotes, parentheses and braces, or at the `}` that
          closes a top-level loop `N{...}` or conditional `?cond{...}`. A loop or conditional
          is therefore sent whole, once its closing brace arrives; its header alone is never a
          segment. Text inside '...' or "..." never ends a statement.
Python    A statement ends at a newline outside brackets and strings, or at a `;` outside them
          (`a(); b()` is two statements, as on two lines). A line ending in `:` opens a block
          (`for`, `if`, `while`, ...) that is complete when the next line at the header's
          indentation or left of it is not `else`/`elif`/`except`/`finally`; a header with its
          body on the same line (`for o in l: a(); b()`) is one statement. `def task():` only
          wraps a plan, as many LLM planners write it: its body's statements (on its line after
          the `:`, or on the indented lines below) are segmented as the plan's own.

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

    def end_of_plan(self) -> Segment:
        """An empty last segment, for a plan that ended after its last segment was sent (an
        engine's end-of-sequence token, which adds no text): its dispatch is what tells the
        robot that the plan has ended (dispatch/robot_queue.py), so it goes on to its next task
        at once."""
        return self._emit("", [])


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
        self._line: list[str] = []  # the current line since a statement last ended on it
        self._comment = False
        self._depth = 0
        self._in_block = False
        self._block_indent = 0  # indentation of the header that opened the block
        self._indent = 0  # indentation of the current line
        self._at_line_start = True  # only spaces read on this line so far
        self._line_has_code = False
        self._header_colon = False  # a ':' outside brackets on this line: a block header
        self._first_word = ""  # the current line's first word ('def', 'for', 'else', ...)
        self._reading_first_word = False
        self._last_code_char = ""
        self._deciding = False  # reading the first word of a line that may end the block

    def feed(self, text: str) -> list[Segment]:
        out: list[Segment] = []
        for ch in text:
            if self._reading_first_word:
                if ch.isalnum() or ch == "_":
                    self._first_word += ch
                    self._line.append(ch)
                    self._last_code_char = ch
                    continue
                self._reading_first_word = False
                if self._deciding:
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
                self._indent += self._at_line_start
                continue
            if self._at_line_start:
                self._at_line_start = False
                self._line_has_code = ch != "#"
                # Back at (or left of) the block header's indentation, a line's first word
                # decides whether the block ended (`else:` continues it).
                self._deciding = self._in_block and self._line_has_code and self._indent <= self._block_indent
                if ch.isalpha() or ch == "_":
                    self._first_word, self._reading_first_word = ch, True
                    self._last_code_char = ch
                    continue
                if self._deciding:
                    self._decide_block_end(out)
            elif ch != "#":
                self._line_has_code = True  # code after a statement that ended on this line
            if ch == "#":
                self._comment = True
            elif ch == "'" or ch == '"':
                self._quote = ch
            elif ch in "([{":
                self._depth += 1
            elif ch in ")]}":
                self._depth = max(0, self._depth - 1)
            elif ch == ":" and self._depth == 0 and not self._in_block:
                if self._first_word == "def":
                    # `def task():` only wraps the plan: the statements of its body are the plan's.
                    self._end_statement(out, wrapper=True)
                    continue
                self._header_colon = True
            elif ch == ";" and self._depth == 0 and not self._in_block and not self._header_colon:
                self._end_statement(out)  # `a(); b()` is two statements, as on two lines
                continue
            self._last_code_char = ch
        return out

    def _decide_block_end(self, out: list[Segment]) -> None:
        self._deciding = False
        if self._first_word in _BLOCK_CONTINUATIONS:
            return
        block = "".join(self._statement)
        self._statement.clear()
        self._in_block = False
        self._statement_done(block, out)

    def _end_statement(self, out: list[Segment], wrapper: bool = False) -> None:
        """A statement ends inside the line (at ';', or a `def ...:` header); the rest of the
        line is read as the next statement."""
        statement = "".join(self._statement) + "".join(self._line)
        self._statement.clear()
        self._line.clear()
        self._line_has_code = self._header_colon = False
        self._first_word = self._last_code_char = ""
        if wrapper:
            self._prefix.append(statement)  # sent with the first statement of its body
        else:
            self._statement_done(statement, out)

    def _end_line(self, out: list[Segment]) -> None:
        line = "".join(self._line)
        self._line.clear()
        has_code, header = self._line_has_code, self._header_colon
        indent = self._indent
        self._line_has_code = self._header_colon = False
        self._indent, self._at_line_start, self._first_word = 0, True, ""
        self._statement.append(line)
        if self._in_block or not has_code:
            return
        if header and self._last_code_char == ":":
            self._in_block = True
            self._block_indent = indent
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
