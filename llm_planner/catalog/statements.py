"""Top-level statements of a plan as it is written, and the bound on repeating them.

A small model caught in a loop writes the same statement until the token limit. No
context-free grammar can count repeats, so the constraint keeps a `RepeatGuard`: it reads
the plan text as it grows and, once a statement has been written `max_repeats` times in all
or `max_run` times in a row, asks for the plan to end at the next point where the grammar
allows an end. A plan that needs more of the same writes a loop (`4{tp();tc(90)}`,
`for obj in [...]:`).

Statements, by syntax: MiniSpec ends one at `;` outside quotes and braces, or at the `}` that
closes a top-level block; Python ends one at a newline outside brackets and strings (a block's
lines count one by one). The guard is a pure function of the text, so a resumed generation
rebuilds exactly the state the suspended one had.
"""

from __future__ import annotations

from collections import Counter

DEFAULT_MAX_REPEATS = 4
DEFAULT_MAX_RUN = 2


class StatementSplitter:
    """Fed text piece by piece; returns the statements each piece completes."""

    def __init__(self, syntax: str) -> None:
        if syntax not in ("minispec", "python"):
            raise ValueError(f"no statement rule for syntax {syntax!r}")
        self.syntax = syntax
        self._current: list[str] = []
        self._depth = 0
        self._quote: str | None = None

    def feed(self, text: str) -> list[str]:
        done: list[str] = []
        for ch in text:
            self._current.append(ch)
            if self._quote:
                if ch == self._quote:
                    self._quote = None
                continue
            if ch in "'\"":
                self._quote = ch
            elif ch in "({[":
                self._depth += 1
            elif ch in ")}]":
                self._depth = max(0, self._depth - 1)
                if ch == "}" and self._depth == 0 and self.syntax == "minispec":
                    self._end(done)
            elif self._depth == 0 and ch == (";" if self.syntax == "minispec" else "\n"):
                self._end(done)
        return done

    @property
    def unfinished(self) -> str:
        """The text fed since the last statement ended (e.g. a block left open at the end)."""
        return "".join(self._current).strip()

    def _end(self, done: list[str]) -> None:
        statement = "".join(self._current).strip().rstrip(";").strip()
        self._current.clear()
        if statement:
            done.append(statement)


class RepeatGuard:
    def __init__(self, syntax: str, max_repeats: int = DEFAULT_MAX_REPEATS, max_run: int = DEFAULT_MAX_RUN) -> None:
        self._splitter = StatementSplitter(syntax)
        self.max_repeats = max_repeats
        self.max_run = max_run
        self._counts: Counter[str] = Counter()
        self._last: str | None = None
        self._run = 0
        self.should_end = False

    def feed(self, text: str) -> bool:
        """Read more plan text; True once the plan should end."""
        for statement in self._splitter.feed(text):
            key = "".join(statement.split())
            self._counts[key] += 1
            self._run = self._run + 1 if key == self._last else 1
            self._last = key
            if self._counts[key] >= self.max_repeats or self._run >= self.max_run:
                self.should_end = True
        return self.should_end
