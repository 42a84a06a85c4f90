"""The engine interface the planner drives: continuous batching at iteration level, with
suspend/resume that keeps a generation's context (no re-prefill on resume)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from dataclasses import dataclass, field

from llm_planner.domain.clock import Clock
from llm_planner.engine.calibration import StepCorrection
from llm_planner.engine.profile import EngineProfile


@dataclass(frozen=True)
class GenerationRequest:
    gen_id: str
    prefix_key: str  # identifies the shared system prompt (the skill set), for prefix caching
    prefix: str  # shared system prompt text
    prompt: str  # the task's own text (scene + instruction)
    forced_output: str | None = None  # sim: the recorded plan to replay token by token
    max_tokens: int = 512
    # Real engines: the shared prefix as chat turns (system text, few-shot examples), and the
    # skill set's plan grammar (EBNF) for constrained decoding, with the plan's syntax (for the
    # bound on repeated statements).
    chat_prefix: tuple[tuple[str, str], ...] = ()
    # Solved tasks shown before this one, as (user, assistant) turns after the shared prefix:
    # the task's own prefill, not cached with the prefix (planning/retrieval.py).
    examples: tuple[tuple[str, str], ...] = ()
    grammar: str | None = None
    plan_syntax: str | None = None
    plan_token_scale: int = 1  # the skill set's: the engine's plan token limit times this


@dataclass(frozen=True)
class TokenOutput:
    gen_id: str
    text: str  # the new text of this step (one token)
    finished: bool
    truncated: bool = False  # finished because the token limit was reached, not by the model


@dataclass(frozen=True)
class StepResult:
    duration_s: float
    outputs: list[TokenOutput]
    prefill_tokens: int = 0


@dataclass
class EngineStats:
    steps: int = 0
    busy_s: float = 0.0
    generated_tokens: int = 0
    prefill_tokens: dict[str, int] = field(default_factory=dict)  # per generation
    prefix_prefill_tokens: int = 0  # shared system prompts, prefilled once each
    resumes: dict[str, int] = field(default_factory=dict)
    max_batch: int = 0
    moved_in: int = 0  # generations that came from another replica (attach)


@dataclass(frozen=True)
class Continuation:
    """A suspended generation taken out of one engine to go on in another (a replica move):
    its request and how far it got. The engine it joins prefills the prompt and the plan so
    far, and continues exactly where the first one stopped."""

    request: GenerationRequest
    tokens: int  # generated so far
    token_ids: tuple[int, ...] = ()  # their ids, for an engine whose next tokens follow from them (vLLM)
    reported_tokens: int = 0  # of those, how many were already turned into text (incremental detokenization)
    text_context_from: int = 0  # where the text context of the next tokens starts


class EngineError(RuntimeError):
    pass


class Engine(ABC):
    stats: EngineStats
    # Set by every engine: the clock its iterations spend time on, and the profile its
    # predictions come from.
    clock: Clock
    profile: EngineProfile
    needs_recorded_plan: bool = False  # True: tasks must bring a recorded plan (the sim engine)
    # The skill sets its model was tuned for: their requests go with the short tuned prompt
    # (planning/prompts.py); every other skill set is prompted with few-shot examples.
    tuned_skill_sets: frozenset[str] = frozenset()

    @abstractmethod
    def add(self, request: GenerationRequest, urgency: float = 0.0) -> None:
        """Start a new generation; it joins the batch at the next step. Higher `urgency` is
        more urgent, as everywhere in the planner (engines that order work internally may use it)."""

    @abstractmethod
    def suspend(self, gen_id: str) -> None:
        """Take a generation out of the batch, keeping its context."""

    @abstractmethod
    def resume(self, gen_id: str, urgency: float = 0.0) -> None:
        """Put a suspended generation back into the batch without re-prefilling it."""

    @abstractmethod
    def release(self, gen_id: str) -> None:
        """Forget a generation (finished or aborted) and free its context."""

    def detach(self, gen_id: str) -> Continuation:
        """Take a suspended generation out of this engine (its context is freed), to be attached
        to another."""
        raise EngineError(f"{type(self).__name__} cannot move generations")

    def attach(self, continuation: Continuation, urgency: float = 0.0) -> None:
        """Go on with a generation detached from another engine: its prompt and the plan so far
        are prefilled here, then it runs as if it had never left."""
        raise EngineError(f"{type(self).__name__} cannot move generations")

    def continuation_of(self, request: GenerationRequest, text: str, tokens: int) -> Continuation:
        """A generation to go on here from what its reader received of it (its plan so far as
        text, in `tokens` tokens), where the engine that held it was lost."""
        return Continuation(request, tokens)

    @abstractmethod
    def step(self) -> StepResult:
        """Run one iteration: every running generation advances by one token."""

    def start_step(self) -> Future:
        """Begin one iteration, for `end_step` to read, so that replicas elsewhere run theirs
        side by side. An engine in this process runs it here and now."""
        future: Future = Future()
        try:
            future.set_result(self.step())
        except Exception as exc:  # noqa: BLE001 -- raised again by end_step
            future.set_exception(exc)
        return future

    def end_step(self, future: Future, timeout_s: float | None = None) -> StepResult:
        """The iteration `start_step` began, once it has ended (its errors raised here)."""
        return future.result(timeout_s)

    @property
    @abstractmethod
    def running(self) -> list[str]: ...

    @abstractmethod
    def context_tokens(self, gen_id: str) -> int: ...

    @abstractmethod
    def prompt_tokens(self, request: GenerationRequest) -> int:
        """Tokens a new request will prefill (its own prompt; a cached prefix is free)."""

    @abstractmethod
    def kv_free_tokens(self) -> int: ...

    def reset(self, clock: Clock) -> None:
        """Forget all generations and start over on `clock` (engines that are costly to start
        are reused across runs)."""
        raise EngineError(f"{type(self).__name__} cannot be reused; make a new one")

    def restart(self) -> None:
        """After a failed step: continue as a working engine with no generations (whatever
        was inside is lost). Default: a reset on the same clock."""
        self.reset(self.clock)

    def close(self) -> None:  # noqa: B027 -- optional: most engines hold nothing
        """Give back what the engine holds (a real engine's processes and memory)."""

    @abstractmethod
    def warm_up(self, requests: list[GenerationRequest]) -> None:
        """Have each request's shared prefix (skill-set prompt) cached before work starts."""

    @abstractmethod
    def predict_step_s(self, batch_size: int, context_tokens: int, prefill_tokens: int = 0, resumes: int = 0) -> float:
        """Predicted duration of one iteration, for admission decisions."""

    def step_correction(self) -> StepCorrection:
        """What measured iterations add to the profile's predictions (engine/calibration.py);
        none for an engine whose time is its profile."""
        return StepCorrection()
