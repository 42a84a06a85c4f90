"""The learned part of the length predictor: one small MLP over the task features and the skill
set, with three heads (RT-LM's regressor, Mico's bucket classifier):

- plan tokens: a normal distribution of log(tokens) (mean and log-variance), so a prediction
  carries an interval, not just a point;
- segments: the same for log(segments);
- buckets: probabilities of the plan's token count falling in each of `len(edges) - 1`
  buckets (edges from the training data's quantiles).

Trained in seconds on a few hundred plans; the checkpoint is a few kilobytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

BUCKETS = 8


class LengthNet(nn.Module):
    def __init__(self, inputs: int, buckets: int, hidden: int = 32) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.tokens = nn.Linear(hidden, 2)  # mean, log-variance of log(tokens)
        self.segments = nn.Linear(hidden, 2)
        self.buckets = nn.Linear(hidden, buckets)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.trunk(x)
        return self.tokens(h), self.segments(h), self.buckets(h)


@dataclass
class TrainedModel:
    """Everything a checkpoint holds: the net, how to scale its inputs, what it belongs to."""

    net: LengthNet
    feature_names: list[str]
    skill_sets: list[str]
    mean: np.ndarray
    std: np.ndarray
    bucket_edges: list[float]
    model_name: str  # the LLM whose plans it learned
    info: dict = field(default_factory=dict)

    def inputs(self, features: list[list[float]], skill_sets: list[str]) -> torch.Tensor:
        x = (np.asarray(features, dtype=np.float32) - self.mean) / self.std
        onehot = np.zeros((len(skill_sets), len(self.skill_sets)), dtype=np.float32)
        for row, name in enumerate(skill_sets):
            if name in self.skill_sets:
                onehot[row, self.skill_sets.index(name)] = 1.0
        return torch.from_numpy(np.concatenate([x, onehot], axis=1))

    def state(self) -> dict:
        return {
            "net": self.net.state_dict(),
            "hidden": self.net.trunk[0].out_features,
            "feature_names": self.feature_names,
            "skill_sets": self.skill_sets,
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "bucket_edges": self.bucket_edges,
            "model_name": self.model_name,
            "info": self.info,
        }

    @classmethod
    def from_state(cls, state: dict) -> TrainedModel:
        inputs = len(state["feature_names"]) + len(state["skill_sets"])
        net = LengthNet(inputs, len(state["bucket_edges"]) - 1, state["hidden"])
        net.load_state_dict(state["net"])
        net.eval()
        return cls(
            net,
            state["feature_names"],
            state["skill_sets"],
            np.asarray(state["mean"], np.float32),
            np.asarray(state["std"], np.float32),
            list(state["bucket_edges"]),
            state["model_name"],
            state.get("info", {}),
        )


def bucket_edges(tokens: list[int], buckets: int = BUCKETS) -> list[float]:
    """Quantile edges (first 0, last infinity) so buckets hold about equally many plans."""
    inner = np.unique(np.quantile(np.asarray(tokens, float), np.linspace(0, 1, buckets + 1)[1:-1]).round())
    return [0.0, *inner.tolist(), float("inf")]


def bucket_of(tokens: float, edges: list[float]) -> int:
    return int(np.searchsorted(np.asarray(edges[1:-1]), tokens, side="right"))


def train(
    features: list[list[float]],
    skill_sets: list[str],
    tokens: list[int],
    segments: list[int],
    feature_names: list[str],
    model_name: str,
    epochs: int = 600,
    seed: int = 0,
) -> TrainedModel:
    """Fit on all but a fifth of the plans (by task), kept to stop training where the loss on
    them is lowest: a few hundred noisy plans overfit a network quickly."""
    torch.manual_seed(seed)
    x_raw = np.asarray(features, dtype=np.float32)
    # a feature constant in training scales by 1, so an unseen value cannot blow up the input
    mean, std = x_raw.mean(axis=0), np.where(x_raw.std(axis=0) < 1e-3, 1.0, x_raw.std(axis=0))
    edges = bucket_edges(tokens)
    model = TrainedModel(
        LengthNet(x_raw.shape[1] + len(sorted(set(skill_sets))), len(edges) - 1),
        feature_names,
        sorted(set(skill_sets)),
        mean,
        std,
        edges,
        model_name,
    )
    x = model.inputs(features, skill_sets)
    log_tokens = torch.log(torch.tensor(tokens, dtype=torch.float32).clamp(min=1))
    log_segments = torch.log(torch.tensor(segments, dtype=torch.float32).clamp(min=1))
    labels = torch.tensor([bucket_of(t, edges) for t in tokens])
    with torch.no_grad():  # start from the training distribution, not from 1 token
        for head, target in ((model.net.tokens, log_tokens), (model.net.segments, log_segments)):
            head.bias.copy_(torch.stack([target.mean(), target.var().clamp(min=1e-3).log()]))
    order = np.random.default_rng(seed).permutation(len(tokens))
    cut = max(1, len(tokens) // 5)
    fit, check = torch.from_numpy(order[cut:]), torch.from_numpy(order[:cut])
    optimizer = torch.optim.Adam(model.net.parameters(), lr=5e-3, weight_decay=1e-3)
    gaussian = nn.GaussianNLLLoss()

    def loss_on(rows: torch.Tensor) -> torch.Tensor:
        tok, seg, logits = model.net(x[rows])
        return (
            gaussian(tok[:, 0], log_tokens[rows], tok[:, 1].exp())
            + gaussian(seg[:, 0], log_segments[rows], seg[:, 1].exp())
            + nn.functional.cross_entropy(logits, labels[rows])
        )

    best, best_epoch = float("inf"), 0
    best_state: dict[str, torch.Tensor] | None = None
    for epoch in range(epochs):
        model.net.train()
        optimizer.zero_grad()
        loss_on(fit).backward()
        optimizer.step()
        model.net.eval()
        with torch.no_grad():
            held = loss_on(check).item()
        if held < best:
            best, best_epoch = held, epoch + 1
            best_state = {k: v.clone() for k, v in model.net.state_dict().items()}
    if best_state is None:
        raise ValueError(f"no epoch of {epochs} gave a finite validation loss: nothing to keep")
    model.net.load_state_dict(best_state)
    model.net.eval()
    model.info = {"samples": len(tokens), "epochs": best_epoch, "validation_loss": best}
    return model
