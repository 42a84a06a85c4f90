"""The plain way to compute a tuning batch's loss: every chat whole, right-padded, through the
causal LM with its labels. The reference that the shared-prefix loss of tuning/train.py is
checked against (a test) and timed against (benchmarks/tuning_step.py)."""

from __future__ import annotations


def whole_chat_loss(model, batch: list[tuple[list[int], list[int]]], pad: int, device: str = "cpu"):
    """`batch`: (token ids, labels with -100 where nothing is learned) per example."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    return model(
        input_ids=torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in batch], device=device),
        attention_mask=torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in batch], device=device),
        labels=torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch], device=device),
    ).loss
