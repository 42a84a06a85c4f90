"""`llm-planner corpus`, `llm-planner tune-model` and `llm-planner average-adapters`: write the
tuning corpus, fine-tune the bundled model (or another base model) on its tuning part into a
LoRA adapter, and average adapters into one."""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

from llm_planner.settings.paths import data_path

CORPUS = data_path("config", "tuning", "corpus.jsonl")


def add_parser(sub) -> None:
    p = sub.add_parser("corpus", help="write the tuning corpus (instruction -> plan pairs of every skill set)")
    p.add_argument("-o", "--output", default=str(CORPUS), help=f"default: {CORPUS}")
    p.add_argument("--per-template", type=int, default=50, help="tasks per template and skill set")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_corpus)
    p = sub.add_parser(
        "tune-model", help="fine-tune the bundled model (or --base-model) with LoRA on the corpus's tuning part"
    )
    p.add_argument(
        "--corpus",
        action="append",
        help=f"a corpus to tune on (its tuning split); repeat to tune on several together (default: {CORPUS})",
    )
    p.add_argument("-o", "--output", help="adapter folder (default: config/tuning/adapter, the one set-up merges)")
    p.add_argument("--epochs", type=float, default=4.0)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--seed", type=int, default=0, help="LoRA initialisation and batch order")
    p.add_argument(
        "--embedding-noise",
        type=float,
        default=0.0,
        metavar="ALPHA",
        help="noise on the input embeddings while training (NEFTune's alpha, e.g. 5; default 0: none)",
    )
    p.add_argument(
        "--limit", type=int, help="only N tuning rows, drawn at random with --seed across every template (a quick try)"
    )
    p.add_argument(
        "--from",
        dest="start_from",
        metavar="ADAPTER",
        help="start from this adapter folder's weights (same rank) instead of a fresh LoRA: tune it further",
    )
    p.add_argument(
        "--base-model",
        metavar="FOLDER",
        help="a local Hugging Face model folder to tune instead of the bundled base model (to try another "
        "base; its chat template must end a turn with <|im_end|> or <end_of_turn>)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads for training (default: every core this process may use, "
        "whatever OMP_NUM_THREADS says for the engine)",
    )
    p.add_argument(
        "--no-merge",
        action="store_true",
        help="do not merge the new adapter into a model folder (the planner model's for the default "
        "output, OUTPUT/model for another)",
    )
    p.set_defaults(func=cmd_tune_model)
    p = sub.add_parser("average-adapters", help="average LoRA adapters of the bundled model into one")
    p.add_argument("adapters", nargs="+", metavar="ADAPTER", help="adapter folders (two or more, same rank)")
    p.add_argument("-o", "--output", help="adapter folder (default: config/tuning/adapter, the one set-up merges)")
    p.add_argument("--no-merge", action="store_true", help="as for tune-model")
    p.set_defaults(func=cmd_average_adapters)


def cmd_corpus(args: argparse.Namespace) -> int:
    from collections import Counter

    from llm_planner.tuning.corpus import build_corpus, write_corpus

    rows = build_corpus(args.per_template, args.seed)
    write_corpus(rows, args.output)
    counts = Counter((r.skill_set, r.split) for r in rows)
    print(
        f"wrote {args.output}: {len(rows)} tasks; "
        + ", ".join(f"{s} {split} {n}" for (s, split), n in sorted(counts.items()))
    )
    return 0


def cmd_tune_model(args: argparse.Namespace) -> int:
    from llm_planner.engine.cpu import cpu_info
    from llm_planner.engine.models import adapter_dir, prepare_default_model, resolve_model
    from llm_planner.tuning.corpus import load_corpus
    from llm_planner.tuning.train import TuneSettings, tune

    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit {args.limit}: give at least 1 row")
    if args.embedding_noise < 0:
        raise ValueError(f"--embedding-noise {args.embedding_noise}: give 0 (none) or more")
    corpora = args.corpus or [str(CORPUS)]
    rows = [r for corpus in corpora for r in load_corpus(corpus) if r.split == "tune"]
    if args.limit:
        # a corpus lists its rows template by template: the first N would cover only a few
        rows = random.Random(args.seed).sample(rows, min(args.limit, len(rows)))
    if not rows:
        raise ValueError(f"{', '.join(corpora)}: no rows of the tuning split")
    import torch

    base = resolve_model(args.base_model) if args.base_model else prepare_default_model()
    out = Path(args.output) if args.output else adapter_dir()
    if args.base_model and out.resolve() == adapter_dir().resolve():
        raise ValueError("--base-model: give -o; the bundled adapter is tuned from the bundled base model")
    if torch.cuda.is_available():
        device, bf16, where = "cuda", torch.cuda.is_bf16_supported(), torch.cuda.get_device_name()
        threads = None
    else:
        info = cpu_info()
        threads = args.threads or len(os.sched_getaffinity(0))
        device, bf16, where = "cpu", info.best_dtype == "bfloat16", f"{info.describe()}, {threads} threads"
    print(f"tuning {base.name} on {len(rows)} tasks ({where}, {'bfloat16' if bf16 else 'float32'})")
    settings = TuneSettings(
        epochs=args.epochs,
        learning_rate=args.learning_rate,
        rank=args.rank,
        alpha=2 * args.rank,
        seed=args.seed,
        embedding_noise=args.embedding_noise,
    )
    start_from = Path(args.start_from) if args.start_from else None
    if start_from is not None and not (start_from / "adapter_model.safetensors").is_file():
        raise ValueError(f"--from {start_from}: no adapter_model.safetensors there")
    result = tune(
        base,
        rows,
        out,
        settings,
        bf16=bf16,
        device=device,
        threads=threads,
        start_from=start_from,
        corpora=tuple(corpora),
    )
    print(
        f"adapter in {out}: {result['steps']} steps, {result['tokens']} tokens, {result['minutes']} min, "
        f"loss {result['final_loss']}"
    )
    if not args.no_merge:
        _merge(out, base)
    return 0


def cmd_average_adapters(args: argparse.Namespace) -> int:
    from llm_planner.engine.models import adapter_dir
    from llm_planner.tuning.average import average_adapters

    out = Path(args.output) if args.output else adapter_dir()
    average_adapters([Path(a) for a in args.adapters], out)
    print(f"adapter in {out}: the mean of {', '.join(args.adapters)}")
    if not args.no_merge:
        _merge(out)
    return 0


def _merge(out: Path, base: Path | None = None) -> None:
    """Merge a new adapter into its model folder (the planner model's for the bundled one), on
    `base` (default: the bundled base model)."""
    from llm_planner.engine.models import adapter_dir, prepare_tuned_model

    if out.resolve() == adapter_dir().resolve():
        print(f"tuned model: {prepare_tuned_model()}")
        return
    merged = prepare_tuned_model(adapter=out, target=out / "model", base=base)
    print(
        f"tuned model: {merged} (its plans: llm-planner plans {CORPUS} --split heldout --engine vllm --model {merged})"
    )
