"""Framework callbacks that feed a `TrainingMetrics`.

One module per framework; importing a module never imports its framework. Each exposes a factory,
`lightning_callback(metrics)`, `keras_callback(metrics)`, `huggingface_callback(metrics)`, which
imports the framework's base class (ImportError naming the pip extra when it is missing) unless
one is passed as `base=` — the seam the tests use with small fake base classes.
"""

from policyd_exporters.callbacks.huggingface import huggingface_callback
from policyd_exporters.callbacks.keras import keras_callback
from policyd_exporters.callbacks.lightning import lightning_callback

__all__ = ["huggingface_callback", "keras_callback", "lightning_callback"]
