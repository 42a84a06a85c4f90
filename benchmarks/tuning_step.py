"""What sharing each skill set's prompt prefix saves in `llm-planner tune-model`: the same
batches of the corpus's tuning part, on the bundled base model with the tuning's LoRA, through
the whole chats (the plain causal-LM loss) and through the shared-prefix loss, alternating
batch by batch in one run. Dropout is off so both must give the same loss; the figure is
training tokens (whole chats) per second of forward and backward.

    python benchmarks/tuning_step.py [--steps 12] [--threads N] [--json F]
"""

from __future__ import annotations

import argparse
import os
import random
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="batches timed with each loss")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--json", help="result file (default out/bench/tuning_step.json)")
    args = parser.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from llm_planner.engine.models import prepare_default_model
    from llm_planner.settings.paths import data_path
    from llm_planner.testing.bench_result import write_bench_result
    from llm_planner.testing.whole_chat_loss import whole_chat_loss
    from llm_planner.tuning.corpus import load_corpus
    from llm_planner.tuning.train import (
        TARGET_MODULES,
        TuneSettings,
        batch_loss,
        epoch_batches,
        tuning_examples,
    )

    torch.set_num_threads(args.threads)
    settings = TuneSettings()
    base = prepare_default_model()
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32),
                           LoraConfig(r=settings.rank, lora_alpha=settings.alpha, target_modules=TARGET_MODULES,
                                      task_type="CAUSAL_LM"))
    model.eval()  # no dropout: the two losses must agree
    rows = [r for r in load_corpus(data_path("config", "tuning", "corpus.jsonl")) if r.split == "tune"]
    examples = tuning_examples(tokenizer, rows, settings.max_tokens)
    batches = epoch_batches(examples, settings.batch_size, random.Random(0))[:args.steps + 1]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def timed(loss_of, batch) -> tuple[float, float]:
        started = time.perf_counter()
        loss = loss_of(batch)
        loss.backward()
        model.zero_grad()
        return time.perf_counter() - started, float(loss.detach())

    whole = lambda batch: whole_chat_loss(model, [(e.ids, e.labels) for e in batch], pad)  # noqa: E731
    shared = lambda batch: batch_loss(model, batch, pad, "cpu")  # noqa: E731
    print(f"{args.steps} batches of {settings.batch_size} tuning chats, {args.threads} threads, float32")
    timed(whole, [examples[i] for i in batches[0]])  # warm-up
    timed(shared, [examples[i] for i in batches[0]])
    seconds = {"whole": 0.0, "shared": 0.0}
    tokens, worst = 0, 0.0
    for k, indices in enumerate(batches[1:]):
        batch = [examples[i] for i in indices]
        tokens += sum(len(e.ids) for e in batch)
        order = (("whole", whole), ("shared", shared)) if k % 2 == 0 else (("shared", shared), ("whole", whole))
        losses = {}
        for name, loss_of in order:
            elapsed, losses[name] = timed(loss_of, batch)
            seconds[name] += elapsed
        worst = max(worst, abs(losses["shared"] - losses["whole"]) / losses["whole"])
    figures = {"whole_tokens_per_s": round(tokens / seconds["whole"], 1),
               "shared_tokens_per_s": round(tokens / seconds["shared"], 1),
               "tokens": tokens, "max_loss_relative_difference": worst}
    ratio = round(seconds["whole"] / seconds["shared"], 3)
    print(f"whole chats  : {figures['whole_tokens_per_s']:7.1f} tokens/s")
    print(f"shared prefix: {figures['shared_tokens_per_s']:7.1f} tokens/s  ({ratio:.2f}x; "
          f"largest loss difference {worst:.1e} of the loss)")
    write_bench_result(args.json, "tuning_step", figures, {"shared_over_whole_speed": ratio},
                       "tune-model's forward and backward per batch: shared-prefix loss vs whole chats")


if __name__ == "__main__":
    main()
