"""The LoRA fine-tune of the bundled model on the corpus's tuning part (`llm-planner tune-model`).

Each example is the chat the engine sends for a tuned skill set (the skill set's short system
turn, the task as the model reads it) with the plan as the answer; the loss counts only the
answer and its end-of-turn token, so the model learns to write the plan and stop. Training runs
on a GPU where torch sees one, else on the CPU's threads; in bfloat16 where the device has it
natively, in float32 elsewhere.

Most of an example is prompt, and its first few dozen tokens (the skill set's system turn) are
the same for every task of a skill set. A batch computes that shared prefix once per skill set
and the rest of each example on top of it, and the output layer only where a token is learned:
the same loss and gradients as the whole chats, in about two thirds of the time
(benchmarks/tuning_step.py).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from llm_planner.catalog.scene import render_task
from llm_planner.catalog.skills import load_skill_set
from llm_planner.tuning.corpus import CorpusRow

TARGET_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass(frozen=True)
class TuneSettings:
    epochs: float = 4.0
    learning_rate: float = 1e-3
    rank: int = 8
    alpha: int = 16
    dropout: float = 0.05
    batch_size: int = 8
    max_tokens: int = 320  # an example's chat is cut here (the corpus's longest are well below)
    seed: int = 0
    embedding_noise: float = 0.0  # NEFTune's alpha (`add_embedding_noise`); 0: none


def chat_messages(row: CorpusRow, with_plan: bool = True) -> list[dict[str, str]]:
    skill_set = load_skill_set(row.skill_set)
    messages = [{"role": role, "content": text} for role, text in skill_set.tuned_chat_prefix()]
    messages.append({"role": "user", "content": render_task(row.task_input)})
    if with_plan:
        messages.append({"role": "assistant", "content": row.task_plan})
    return messages


# What ends a model's turn in the chat templates of the base models tuned here (SmolLM2, Gemma).
END_OF_TURN = ("<|im_end|>", "<end_of_turn>")


def end_of_turn(tokenizer) -> int:
    """The token the tokenizer's chat template ends an answer with."""
    chat = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    text = tokenizer.apply_chat_template(chat, tokenize=False)
    answer = text[text.rindex("y") :]
    for token in END_OF_TURN:
        if token in answer:
            return tokenizer.convert_tokens_to_ids(token)
    raise ValueError(f"the chat template ends an answer with none of {', '.join(END_OF_TURN)}")


def encode_example(tokenizer, row: CorpusRow, max_tokens: int, end: int) -> tuple[list[int], list[int]]:
    """Token ids of the whole chat and the labels: -100 (not learned) over the prompt. `end`:
    the end-of-turn token (`end_of_turn`)."""
    prompt = tokenizer.apply_chat_template(chat_messages(row, False), add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(chat_messages(row), tokenize=False)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    ids = tokenizer.encode(full, add_special_tokens=False)
    if ids[: len(prompt_ids)] != prompt_ids:
        raise ValueError(f"{row.id}: the chat template does not extend the prompt with the answer")
    answer_end = ids.index(end, len(prompt_ids)) + 1 if end in ids[len(prompt_ids) :] else len(ids)
    ids = ids[: min(answer_end, max_tokens)]
    labels = [-100] * len(prompt_ids) + ids[len(prompt_ids) :]
    return ids, labels[: len(ids)]


@dataclass(frozen=True)
class Example:
    ids: list[int]
    labels: list[int]  # -100 where nothing is learned
    prefix: int  # leading tokens shared with every example of the same group


def with_shared_prefixes(encoded: list[tuple[list[int], list[int]]], groups: list[str]) -> list[Example]:
    """Examples whose shared prefix is the longest one common to their group (a skill set), and
    at least one token; it ends before the token that predicts the first learned one, so every
    loss term lies in the rest."""
    by_group: dict[str, list[tuple[list[int], list[int]]]] = {}
    for item, group in zip(encoded, groups):
        by_group.setdefault(group, []).append(item)
    prefix = {}
    for group, items in by_group.items():
        length = min(next((i for i, lab in enumerate(labels) if lab != -100), len(labels)) for _, labels in items) - 1
        if length < 1:
            raise ValueError(f"{group}: an example learns its first tokens (no prompt before its answer)")
        first = items[0][0]
        for ids, _ in items[1:]:
            length = min(length, next((i for i, (a, b) in enumerate(zip(first, ids)) if a != b), len(ids)))
        prefix[group] = max(1, length)
    return [Example(ids, labels, prefix[group]) for (ids, labels), group in zip(encoded, groups)]


def tuning_examples(tokenizer, rows: list[CorpusRow], max_tokens: int) -> list[Example]:
    """The rows' chats, encoded, each group a skill set."""
    end = end_of_turn(tokenizer)
    return with_shared_prefixes(
        [encode_example(tokenizer, row, max_tokens, end) for row in rows], [row.skill_set for row in rows]
    )


def batch_loss(model, batch: list[Example], pad: int, device: str):
    """Mean cross-entropy over the learned tokens of `batch` (a peft causal LM): each distinct
    shared prefix runs once, its keys and values are given to every example that starts with it,
    and the output layer runs on the learned positions only."""
    import torch
    import torch.nn.functional as F

    causal_lm = model.get_base_model()
    prefixes: dict[tuple[int, ...], int] = {}
    for example in batch:
        prefixes.setdefault(tuple(example.ids[: example.prefix]), len(prefixes))
    width = max(len(p) for p in prefixes)
    prefix_ids = torch.tensor([list(p) + [pad] * (width - len(p)) for p in prefixes], device=device)
    prefix_mask = torch.tensor([[1] * len(p) + [0] * (width - len(p)) for p in prefixes], device=device)
    decoder = causal_lm.get_decoder()
    cache = decoder(input_ids=prefix_ids, attention_mask=prefix_mask, use_cache=True).past_key_values
    rows = torch.tensor([prefixes[tuple(e.ids[: e.prefix])] for e in batch], device=device)
    cache.batch_select_indices(rows)  # each example's prefix row (an index, so gradients reach it)
    rest = [e.ids[e.prefix :] for e in batch]
    length = max(len(r) for r in rest)
    input_ids = torch.tensor([r + [pad] * (length - len(r)) for r in rest], device=device)
    rest_mask = torch.tensor([[1] * len(r) + [0] * (length - len(r)) for r in rest], device=device)
    # Keys of the prefix sit at columns 0..width-1 of the cache; positions (for RoPE) continue
    # each example's own prefix, the mask hides the padding between the two.
    position_ids = torch.tensor([[e.prefix + i for i in range(length)] for e in batch], device=device)
    hidden = decoder(
        input_ids=input_ids,
        attention_mask=torch.cat([prefix_mask[rows], rest_mask], 1),
        position_ids=position_ids,
        past_key_values=cache,
    ).last_hidden_state
    # Position j of the rest predicts token j + 1 of the rest.
    targets = torch.tensor(
        [e.labels[e.prefix + 1 :] + [-100] * (length - len(e.ids) + e.prefix) for e in batch], device=device
    )
    learned = targets != -100
    return F.cross_entropy(causal_lm.get_output_embeddings()(hidden[:, :-1][learned]).float(), targets[learned])


def add_embedding_noise(model, alpha: float):
    """While `model` trains, add uniform noise to its input embeddings, scaled by
    alpha / sqrt(tokens x width) per forward pass (NEFTune, Jain et al. 2023): a model tuned on
    templated text then leans less on their exact wording. Returns the hook's handle."""
    import torch

    def noisy(module, inputs, output):
        if not module.training:
            return output
        tokens, width = output.shape[-2], output.shape[-1]
        scale = alpha / math.sqrt(tokens * width)
        return output + torch.empty_like(output).uniform_(-scale, scale)

    return model.get_input_embeddings().register_forward_hook(noisy)


def epoch_batches(examples: list[Example], size: int, rng: random.Random) -> list[list[int]]:
    """One epoch's batches in random order, each of examples of similar length (little padding
    to compute): shuffled, then sorted by length within windows of a few batches."""
    order = list(range(len(examples)))
    rng.shuffle(order)
    window = size * 8
    batches = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start : start + window], key=lambda i: len(examples[i].ids))
        batches += [chunk[i : i + size] for i in range(0, len(chunk), size)]
    rng.shuffle(batches)
    return batches


def tune(
    base_dir: Path,
    rows: list[CorpusRow],
    out_dir: Path,
    settings: TuneSettings = TuneSettings(),
    bf16: bool = False,
    device: str = "cpu",
    threads: int | None = None,
    log: Callable[[str], None] = print,
    start_from: Path | None = None,
    corpora: tuple[str, ...] = (),
) -> dict:
    """Train a LoRA adapter on `rows` and save it (safetensors, bfloat16) with its settings;
    returns what the run measured. `threads`: torch's CPU threads (default: torch's own).
    `start_from`: an adapter folder whose weights the new adapter starts from. `corpora`: the
    files `rows` came from, recorded with the adapter."""
    import torch
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(base_dir))
    # PreTrainedModel.to is @wraps(nn.Module.to), which the stubs read as the unbound method (self first)
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32).to(device)  # type: ignore[arg-type]
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=TARGET_MODULES,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, config)
    if start_from is not None:
        weights = {k: v.to(torch.float32) for k, v in load_file(str(start_from / "adapter_model.safetensors")).items()}
        shapes = {k: v.shape for k, v in get_peft_model_state_dict(model).items()}
        if {k: v.shape for k, v in weights.items()} != shapes:
            raise ValueError(f"{start_from}: not an adapter of this base model, rank and target modules")
        set_peft_model_state_dict(model, weights)
    if settings.embedding_noise > 0:
        add_embedding_noise(model, settings.embedding_noise)
    examples = tuning_examples(tokenizer, rows, settings.max_tokens)
    steps_per_epoch = math.ceil(len(examples) / settings.batch_size)
    total_steps = max(1, round(steps_per_epoch * settings.epochs))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=settings.learning_rate)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / 20) * max(0.0, 1 - step / total_steps)
    )
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    model.train()
    started, tokens, losses = time.monotonic(), 0, []
    batches: list[list[int]] = []
    for step in range(total_steps):
        if not batches:
            batches = epoch_batches(examples, settings.batch_size, rng)
        batch = [examples[i] for i in batches.pop()]
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
            loss = batch_loss(model, batch, pad, device)
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        tokens += sum(len(e.ids) for e in batch)
        losses.append(float(loss.detach()))
        if step % 20 == 0 or step == total_steps - 1:
            elapsed = time.monotonic() - started
            log(
                f"step {step + 1}/{total_steps}: loss {sum(losses[-20:]) / len(losses[-20:]):.3f}, "
                f"{tokens / max(elapsed, 1e-9):.0f} tokens/s, {elapsed / 60:.1f} min"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in get_peft_model_state_dict(model).items()}
    save_file(state, str(out_dir / "adapter_model.safetensors"))
    model.peft_config["default"].save_pretrained(str(out_dir))
    result = {
        "base_model": base_dir.name,
        "skill_sets": sorted({r.skill_set for r in rows}),
        "examples": len(examples),
        "steps": total_steps,
        "tokens": tokens,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "final_loss": round(sum(losses[-20:]) / len(losses[-20:]), 4),
        "bf16": bf16,
        "device": device,
        "threads": torch.get_num_threads() if device == "cpu" else None,
        "settings": asdict(settings),
        "started_from": str(start_from) if start_from is not None else None,
        "corpora": list(corpora),
    }
    (out_dir / "training.json").write_text(json.dumps(result, indent=1) + "\n")
    return result
