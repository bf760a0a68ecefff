"""Real training runs with the callbacks: PyTorch Lightning, Keras 3 on PyTorch, Hugging Face.

Nothing is downloaded: models are built from configs, data is made in the tests. The hubs are
switched off before anything imports `huggingface_hub` (it reads these variables once, at
import), so an attempt to download fails loudly instead of reaching the network; Keras reads its
backend at import too. The frameworks come from the exporters' `test` extra (scripts/test).
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["KERAS_BACKEND"] = "torch"
