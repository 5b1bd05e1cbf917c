"""The digits MLP as a LightningModule, and a plain-loop replica of its training (for the tests).

A module of its own: Lightning's ``ddp_spawn`` processes import it by name.
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch

from landscape.examples import MLP, digits_loader


class LitMLP(pl.LightningModule):
    def __init__(self, fail_at_step: int | None = None) -> None:
        super().__init__()
        self.net = MLP()
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.fail_at_step = fail_at_step

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        if self.fail_at_step is not None and self.global_step >= self.fail_at_step:
            raise RuntimeError("training failed on purpose")
        x, y = batch
        loss = self.loss_fn(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", self.loss_fn(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


def trainer(**kwargs) -> pl.Trainer:
    """A quiet CPU trainer: no logger, no progress bar, no summary."""
    base = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, num_sanity_val_steps=0)
    base.update(kwargs)
    return pl.Trainer(**base)


def replica(epochs: int, accumulate: int = 1, seed: int = 0) -> tuple[list[float], list[dict]]:
    """Train LitMLP's network the way Lightning does, in a plain loop, on ``digits_loader(64,
    shuffle=False)``: the loss of each optimizer step (the mean of its batches' losses)
    and the state dict after each step."""
    torch.manual_seed(seed)
    model = LitMLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loader = digits_loader(64, shuffle=False)
    losses, states, acc = [], [], []
    for _ in range(epochs):
        batches = list(loader)
        for i, (x, y) in enumerate(batches):
            if i % accumulate == 0:
                opt.zero_grad()
            loss = model.loss_fn(model(x), y)
            (loss / accumulate).backward()
            acc.append(loss.item())
            if (i + 1) % accumulate == 0 or i + 1 == len(batches):
                opt.step()
                losses.append(sum(acc) / len(acc))
                acc = []
                states.append({k: t.detach().clone() for k, t in model.state_dict().items()})
    return losses, states
