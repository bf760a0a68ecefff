"""Framework callbacks that feed a `TrainingMetrics`.

One module per framework; importing a module never imports its framework. Each exposes a factory,
`lightning_callback(metrics)`, `keras_callback(metrics)`, `huggingface_callback(metrics)`, which
imports the framework's base class (ImportError naming the pip extra when it is missing) unless
one is passed as `base=` — the seam the unit tests use with small fake base classes.
`huggingface_stop_callback(should_stop)` makes the Hugging Face Trainer checkpoint and stop.
A framework that renamed or stopped calling a hook is reported with a `HookWarning` (`_hooks`).
"""

from policyd_exporters.callbacks._hooks import HookWarning
from policyd_exporters.callbacks.huggingface import huggingface_callback, huggingface_stop_callback
from policyd_exporters.callbacks.keras import keras_callback
from policyd_exporters.callbacks.lightning import lightning_callback

__all__ = [
    "HookWarning",
    "huggingface_callback",
    "huggingface_stop_callback",
    "keras_callback",
    "lightning_callback",
]
