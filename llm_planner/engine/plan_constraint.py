"""Grammar-constrained decoding that can start in the middle of a plan.

vLLM's built-in structured outputs compile a grammar and start matching at the first output
token. A resumed generation, though, is a new vLLM request whose prompt already ends with the
plan generated so far, so the grammar must continue from that prefix rather than restart
(a MiniSpec segment may end inside a loop body; a Python block ends only when the next line's
first word has been read). This logits processor uses the same grammar engine as vLLM's
structured outputs (xgrammar) through vLLM's logits-processor interface: each request's
matcher first consumes the plan tokens at the end of its prompt, then every output token, and
masks the logits to the tokens the grammar allows next.

With the plan's syntax given, a `RepeatGuard` reads the plan's text too and, once a statement
has been repeated too often, allows only the end of the plan at the next point where the
grammar allows it (a grammar cannot count repeats).

A request opts in with `SamplingParams(extra_args={EXTRA_ARG: {"grammar": ebnf,
"plan_start": k, "syntax": "minispec"}})`, where prompt ids from index k on are plan tokens
already generated; without "syntax" there is no repeat guard.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import torch
import xgrammar as xgr
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from llm_planner.catalog.statements import RepeatGuard

EXTRA_ARG = "llm_planner_plan_grammar"
COMPILED_GRAMMARS_KEPT = 256


def stop_token_ids(model_dir: str | Path, tokenizer) -> list[int]:
    """The ids vLLM stops at: the tokenizer's EOS and the generation config's eos ids."""
    ids = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_config = Path(model_dir) / "generation_config.json"
    if gen_config.is_file():
        eos = json.loads(gen_config.read_text()).get("eos_token_id")
        ids.update([eos] if isinstance(eos, int) else (eos or []))
    return sorted(ids)


class _RequestConstraint:
    """One request's matcher; called by vLLM with (prompt ids, output ids so far, logits row)."""

    def __init__(
        self,
        matcher: xgr.GrammarMatcher,
        plan_start: int,
        vocab_size: int,
        guard: RepeatGuard | None = None,
        token_text=None,
        stop_ids: Sequence[int] = (),
    ) -> None:
        self.matcher = matcher
        self.plan_start = plan_start
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self.guard = guard
        self.token_text = token_text  # token id -> its text, for the guard
        self.stop_ids = list(stop_ids)
        self.fed_prompt = False
        self.seen = 0
        self.broken = False

    def __call__(self, prompt_ids: list[int], output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        if self.broken:
            return logits
        if not self.fed_prompt:
            self.fed_prompt = True
            self._accept(prompt_ids[self.plan_start :])
        self._accept(output_ids[self.seen :])
        self.seen = len(output_ids)
        if self.broken or self.matcher.is_terminated():
            return logits
        self.matcher.fill_next_token_bitmask(self.bitmask)
        if self.guard is not None and self.guard.should_end:
            self._only_end_if_allowed()
        row = logits.unsqueeze(0)
        xgr.apply_token_bitmask_inplace(row, self.bitmask.to(logits.device))
        return logits

    def _only_end_if_allowed(self) -> None:
        """Mask all but the stop tokens, if the grammar allows the plan to end here."""
        allowed = [t for t in self.stop_ids if int(self.bitmask[0, t // 32]) >> (t % 32) & 1]
        if allowed:
            self.bitmask.zero_()
            for t in allowed:
                bit = 1 << (t % 32)
                self.bitmask[0, t // 32] |= bit - (1 << 32) if bit >= 1 << 31 else bit  # int32 words

    def _accept(self, token_ids: list[int]) -> None:
        for token in token_ids:
            if self.matcher.is_terminated() or not self.matcher.accept_token(token):
                # Only possible for a prefix generated without the constraint: stop masking
                # rather than force an impossible continuation.
                self.broken = True
                return
            if self.guard is not None:
                self.guard.feed(self.token_text(token))


class PlanGrammarLogitsProcessor(AdapterLogitsProcessor):
    def __init__(self, vllm_config, device: torch.device, is_pin_memory: bool) -> None:
        super().__init__(vllm_config, device, is_pin_memory)
        from transformers import AutoTokenizer

        model_config = vllm_config.model_config
        tokenizer = AutoTokenizer.from_pretrained(model_config.tokenizer)
        self.vocab_size = model_config.get_vocab_size()
        self.tokenizer = tokenizer
        self.stop_ids = stop_token_ids(model_config.model, tokenizer)
        self._token_texts: dict[int, str] = {}
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=self.vocab_size, stop_token_ids=self.stop_ids)
        self.compiler = xgr.GrammarCompiler(info)
        # Grammars are per task (its scene's objects): bounded, the most recently used kept.
        self._compiled: OrderedDict[str, xgr.CompiledGrammar] = OrderedDict()

    def is_argmax_invariant(self) -> bool:
        return False

    def new_req_logits_processor(self, params):
        spec = (params.extra_args or {}).get(EXTRA_ARG)
        if not spec:
            return None
        compiled = self._compile(spec["grammar"])
        guard = RepeatGuard(spec["syntax"]) if spec.get("syntax") else None
        return _RequestConstraint(
            xgr.GrammarMatcher(compiled),
            int(spec.get("plan_start", 0)),
            self.vocab_size,
            guard,
            self._token_text,
            self.stop_ids,
        )

    def _compile(self, grammar: str) -> xgr.CompiledGrammar:
        compiled = self._compiled.pop(grammar, None)
        if compiled is None:
            compiled = self.compiler.compile_grammar(grammar)  # a few ms once the skill set's was compiled
        self._compiled[grammar] = compiled
        while len(self._compiled) > COMPILED_GRAMMARS_KEPT:
            self._compiled.popitem(last=False)
        return compiled

    def _token_text(self, token: int) -> str:
        """A token's text on its own (a character split across tokens reads as U+FFFD; the
        guard only compares statements, so that does not matter)."""
        text = self._token_texts.get(token)
        if text is None:
            # one sequence's ids decode to one text (transformers annotates batches' lists too)
            text = self._token_texts[token] = cast(str, self.tokenizer.decode([token], skip_special_tokens=True))
        return text
