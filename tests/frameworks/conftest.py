"""Real training runs with the callbacks: PyTorch Lightning, Keras 3 on PyTorch, Hugging Face.

Nothing is downloaded: models are built from configs, data is made in the tests. The hubs are
switched off before anything imports `huggingface_hub` (it reads these variables once, at
import), so an attempt to download fails loudly instead of reaching the network; Keras reads its
backend at import too. The frameworks come from the exporters' `test` extra (scripts/test).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["KERAS_BACKEND"] = "torch"


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Tiny models gain nothing from torch's intra-op threads, and on a busy 2-core machine the
    threads' spinning made 20 steps of a tiny BERT take 10 s instead of 0.5 s."""
    import torch  # noqa: PLC0415 (torch reads no environment at import: no need to be early)

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
