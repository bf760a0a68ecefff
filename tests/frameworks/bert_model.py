"""The tiny Hugging Face job of these tests: a two-layer BERT built from its config (nothing is
downloaded) classifying synthetic token sequences."""

from __future__ import annotations

import torch
from transformers import BertConfig, BertForSequenceClassification


class Tokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """64 sequences of 8 token ids; the label says whether the first token is in the upper
    half of the vocabulary."""

    def __init__(self) -> None:
        self.ids = torch.randint(0, 64, (64, 8), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": (self.ids[i, 0] >= 32).long()}


def bert() -> BertForSequenceClassification:
    torch.manual_seed(0)
    return BertForSequenceClassification(BertConfig(
        vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=2))
