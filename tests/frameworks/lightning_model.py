"""The tiny Lightning job of these tests: y = sum(x) by a linear layer, 8 batches an epoch."""

from __future__ import annotations

import time
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset

BATCHES = 8


class Regression(L.LightningModule):
    """Records every loss `training_step` hands to Lightning; sleeps `step_sleep` s a step."""

    def __init__(self, step_sleep: float = 0.0) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.losses: list[float] = []
        self.step_sleep = step_sleep

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.linear(x), y)
        self.losses.append(loss.detach().item())
        time.sleep(self.step_sleep)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def data() -> DataLoader[Any]:
    x = torch.randn(BATCHES * 8, 4, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)
