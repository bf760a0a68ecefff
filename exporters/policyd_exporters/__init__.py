"""policyd_exporters: what a training job installs so that policyd can see and move it.

* `TrainingMetrics` + `serve()`: expose the job's loss, steps and progress to Prometheus.
* `Identity`: the labels that name the job (`Identity.from_env(os.environ)` on Kubernetes/Docker).
* `Checkpointer`: checkpoint on SIGTERM between two steps and resume, for SpeCon's migrations.
* `policyd_exporters.callbacks`: PyTorch Lightning, Keras and Hugging Face callbacks (the
  framework is imported only when its callback is built).
* `python -m policyd_exporters.logtail` (`policyd-logtail`): export a loss read from a log.

The contract with policyd (metric names, labels, the checkpoint protocol) is in README.md.
"""

from policyd_exporters.checkpoint import (
    Checkpointer,
    CheckpointError,
    Resumed,
    catch_stop_signals,
)
from policyd_exporters.identity import Identity
from policyd_exporters.metrics import TrainingMetrics
from policyd_exporters.server import MetricsServer, serve
from policyd_exporters.window import DEFAULT_SMOOTHING_STEPS

__all__ = [
    "DEFAULT_SMOOTHING_STEPS",
    "CheckpointError",
    "Checkpointer",
    "Identity",
    "MetricsServer",
    "Resumed",
    "TrainingMetrics",
    "catch_stop_signals",
    "serve",
]
