"""The `sim` engine: continuous batching as a discrete-event model.

Content is teacher-forced: each generation replays its recorded plan one real token per step.
Time comes from an engine profile: every step costs a decode iteration for the batch plus the
prefill chunks scheduled in it (chunked prefill, like vLLM). The step's duration is spent on
the given clock (instantly on a virtual clock, really on a wall clock).

KV space as vLLM's prefix cache keeps it: a suspended generation's context stays cached and
a resume prefills only its last, partial block, until the running generations need the
space; then the contexts suspended longest ago are evicted first, and their resumes prefill
the prompt and the plan so far again. Free space is what the running generations and the
shared prefixes leave: cached contexts give way to them. A new prompt prefills what the
blocks of earlier prompts do not cover, counted as the real engine counts it
(`PrefixBlocks`): after its skill set's prefix, from the prefix's last partial block on; a
repeated prompt, only its own last partial block.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer

from llm_planner.catalog.tokenizer import token_pieces
from llm_planner.domain.clock import Clock
from llm_planner.engine.base import (
    Continuation,
    Engine,
    EngineError,
    EngineStats,
    GenerationRequest,
    StepResult,
    TokenOutput,
)
from llm_planner.engine.prefix_blocks import PrefixBlocks
from llm_planner.engine.profile import EngineProfile

# Chat-template tokens around the task text (role markers); SmolLM2/Llama-3 use about this.
TEMPLATE_TOKENS = 10
# Stand-ins for those tokens in a prompt's ids: the same in every prompt, no real token's id.
_TEMPLATE_IDS = tuple(range(-TEMPLATE_TOKENS, 0))
# A retrieved example's user and assistant turns add their role markers (11 in SmolLM2's template).
EXAMPLE_TEMPLATE_TOKENS = 11
_EXAMPLE_TEMPLATE_IDS = tuple(range(-TEMPLATE_TOKENS - EXAMPLE_TEMPLATE_TOKENS, -TEMPLATE_TOKENS))


@dataclass
class _SimSequence:
    request: GenerationRequest
    pieces: list[str]
    prefix_tokens: int  # shared system prompt (attended to, cached once if prefix caching)
    own_tokens: int  # this generation's prompt tokens held in its own KV blocks
    prefill_left: int
    emitted: int = 0
    running: bool = True

    @property
    def context(self) -> int:
        """Tokens attended to in a decode step."""
        return self.prefix_tokens + self.own_tokens + self.emitted

    @property
    def kv_tokens(self) -> int:
        return self.own_tokens + self.emitted


class SimEngine(Engine):
    needs_recorded_plan = True  # it replays recorded plans; tasks without one are rejected

    def __init__(self, profile: EngineProfile, tokenizer: Tokenizer, clock: Clock) -> None:
        self.profile = profile
        self.tokenizer = tokenizer
        self.clock = clock
        self.stats = EngineStats()
        self._gens: dict[str, _SimSequence] = {}
        self._order: list[str] = []  # running generations in admission order
        self._cached: dict[str, None] = {}  # suspended generations whose context is still cached, oldest first
        self._pending_resumes = 0
        self._cached_prefixes: dict[str, int] = {}
        self._blocks = self._new_block_cache()
        self._piece_cache: dict[str, list[str]] = {}
        self._ids_cache: dict[str, tuple[int, ...]] = {}
        self._prompt_ids_cache: dict[tuple[str, tuple[tuple[str, str], ...], str], tuple[int, ...]] = {}

    def _new_block_cache(self) -> PrefixBlocks | None:
        """The prefix cache by blocks, where the profile says the engine has one and its block size."""
        size = self.profile.kv_block_size
        if not (self.profile.prefix_caching and size):
            return None
        return PrefixBlocks(size, self.profile.kv_capacity_tokens // size)

    def reset(self, clock: Clock) -> None:
        self.clock = clock
        self.stats = EngineStats()
        self._gens.clear()
        self._order.clear()
        self._cached.clear()
        self._pending_resumes = 0
        self._cached_prefixes.clear()
        if self._blocks is not None:
            self._blocks.clear()

    def _ids(self, text: str) -> tuple[int, ...]:
        ids = self._ids_cache.get(text)
        if ids is None:
            ids = self._ids_cache[text] = tuple(self.tokenizer.encode(text, add_special_tokens=False).ids)
        return ids

    def _prompt_ids(self, request: GenerationRequest) -> tuple[int, ...]:
        key = (request.prefix, request.examples, request.prompt)
        ids = self._prompt_ids_cache.get(key)
        if ids is None:
            ids = self._ids(request.prefix) + _TEMPLATE_IDS
            for task, plan in request.examples:
                ids += self._ids(task) + self._ids(plan) + _EXAMPLE_TEMPLATE_IDS
            ids = self._prompt_ids_cache[key] = ids + self._ids(request.prompt)
        return ids

    def _count(self, text: str) -> int:
        return len(self._ids(text))

    def _own_tokens(self, request: GenerationRequest) -> int:
        """The task's own prompt tokens: its examples' turns and its user turn."""
        examples = sum(
            self._count(task) + self._count(plan) + EXAMPLE_TEMPLATE_TOKENS for task, plan in request.examples
        )
        return examples + self._count(request.prompt) + TEMPLATE_TOKENS

    def prompt_tokens(self, request: GenerationRequest) -> int:
        if self._blocks is not None:
            ids = self._prompt_ids(request)
            return len(ids) - self._blocks.cached_tokens(ids)
        own = self._own_tokens(request)
        if self.profile.prefix_caching and request.prefix_key in self._cached_prefixes:
            return own
        return own + self._count(request.prefix)

    def add(self, request: GenerationRequest, urgency: float = 0.0) -> None:
        if request.gen_id in self._gens:
            raise EngineError(f"generation {request.gen_id} already exists")
        if request.forced_output is None:
            raise EngineError("the sim engine replays recorded plans; this request has none")
        pieces = self._piece_cache.get(request.forced_output)
        if pieces is None:
            pieces = self._piece_cache[request.forced_output] = token_pieces(self.tokenizer, request.forced_output)
        prefill = self.prompt_tokens(request)
        prefix_tokens = self._count(request.prefix)
        own = self._own_tokens(request)
        if self.profile.prefix_caching:
            if request.prefix_key not in self._cached_prefixes:
                self._cached_prefixes[request.prefix_key] = prefix_tokens
                self.stats.prefix_prefill_tokens += prefix_tokens
        else:
            own += prefix_tokens
            prefix_tokens = 0
        if self._blocks is not None:
            self._blocks.add(self._prompt_ids(request))
        gen = _SimSequence(request, pieces[: request.max_tokens], prefix_tokens, own, prefill)
        self._gens[request.gen_id] = gen
        self._order.append(request.gen_id)
        self.stats.prefill_tokens[request.gen_id] = 0

    def warm_up(self, requests: list[GenerationRequest]) -> None:
        """Mark each request's shared prefix as already cached (as a warmed-up real engine, which
        prefills each request once)."""
        if self.profile.prefix_caching:
            for request in requests:
                self._cached_prefixes.setdefault(request.prefix_key, self._count(request.prefix))
                if self._blocks is not None:
                    self._blocks.add(self._prompt_ids(request))

    def _get(self, gen_id: str) -> _SimSequence:
        try:
            return self._gens[gen_id]
        except KeyError:
            raise EngineError(f"unknown generation {gen_id}") from None

    def suspend(self, gen_id: str) -> None:
        gen = self._get(gen_id)
        if gen.running:
            gen.running = False
            self._order.remove(gen_id)
            self._cached[gen_id] = None

    def resume(self, gen_id: str, urgency: float = 0.0) -> None:
        gen = self._get(gen_id)
        if not gen.running:
            gen.running = True
            self._order.append(gen_id)
            self._pending_resumes += 1
            if gen_id in self._cached:
                del self._cached[gen_id]
                gen.prefill_left += self.profile.resume_prefill_tokens(gen.context)
            else:  # evicted: its prompt and plan so far again (the shared prefix stays cached)
                gen.prefill_left += gen.kv_tokens
            self.stats.resumes[gen_id] = self.stats.resumes.get(gen_id, 0) + 1

    def release(self, gen_id: str) -> None:
        gen = self._gens.pop(gen_id, None)
        if gen is not None and gen.running:
            self._order.remove(gen_id)
        self._cached.pop(gen_id, None)

    def detach(self, gen_id: str) -> Continuation:
        gen = self._get(gen_id)
        if gen.running:
            raise EngineError(f"generation {gen_id} is running; only a suspended one moves")
        del self._gens[gen_id]
        self._cached.pop(gen_id, None)
        return Continuation(gen.request, gen.emitted)

    def attach(self, continuation: Continuation, urgency: float = 0.0) -> None:
        self.add(continuation.request, urgency)
        gen = self._gens[continuation.request.gen_id]
        gen.emitted = continuation.tokens
        gen.prefill_left += continuation.tokens  # the plan so far, prefilled after the prompt
        self.stats.moved_in += 1

    @property
    def running(self) -> list[str]:
        return list(self._order)

    def context_tokens(self, gen_id: str) -> int:
        return self._get(gen_id).context

    def kv_free_tokens(self) -> int:
        return self.profile.kv_capacity_tokens - self._pinned_kv_tokens()

    def _pinned_kv_tokens(self) -> int:
        """KV space that cached contexts cannot take: the running generations' and the prefixes'."""
        return sum(self._gens[g].kv_tokens for g in self._order) + sum(self._cached_prefixes.values())

    def _evict_to_fit(self) -> None:
        """Evict the contexts suspended longest ago until the rest fit beside the running ones."""
        if not self._cached:  # nothing to evict (most steps: only suspensions fill it)
            return
        over = (
            self._pinned_kv_tokens()
            + sum(self._gens[g].kv_tokens for g in self._cached)
            - self.profile.kv_capacity_tokens
        )
        while over > 0 and self._cached:
            gen_id = next(iter(self._cached))
            del self._cached[gen_id]
            over -= self._gens[gen_id].kv_tokens

    def predict_step_s(self, batch_size: int, context_tokens: int, prefill_tokens: int = 0, resumes: int = 0) -> float:
        return self.profile.predict_step_s(batch_size, context_tokens, prefill_tokens, resumes)

    def step(self) -> StepResult:
        self._evict_to_fit()
        budget = self.profile.max_batched_tokens
        decoding: list[_SimSequence] = []
        prefill = 0
        for gen_id in self._order:
            gen = self._gens[gen_id]
            if gen.prefill_left > 0:
                chunk = min(gen.prefill_left, max(0, budget - len(decoding) - prefill))
                gen.prefill_left -= chunk
                prefill += chunk
                self.stats.prefill_tokens[gen_id] += chunk
                if gen.prefill_left > 0:
                    continue  # prompt not done yet: no token this step
            decoding.append(gen)
        context = sum(g.context for g in decoding)
        duration = self.profile.step_s(len(decoding), context, prefill, self._pending_resumes)
        self._pending_resumes = 0
        self.clock.sleep(duration)
        outputs = []
        for gen in decoding:
            text = gen.pieces[gen.emitted] if gen.emitted < len(gen.pieces) else ""
            gen.emitted += 1
            outputs.append(TokenOutput(gen.request.gen_id, text, gen.emitted >= len(gen.pieces)))
        self.stats.steps += 1
        self.stats.busy_s += duration
        self.stats.generated_tokens += len(decoding)
        self.stats.max_batch = max(self.stats.max_batch, len(self._order))
        return StepResult(duration, outputs, prefill)
