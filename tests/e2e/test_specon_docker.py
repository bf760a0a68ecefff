"""(b) SpeCon on two real Docker engines acting as two hosts: `policyd run` migrates the
converged job by checkpoint to the emptier engine, where it resumes and finishes; the move is
an alert in a real Alertmanager."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.e2e.harness import (
    SPECON_CONVERGED,
    SPECON_JOBS,
    SpeConShape,
    lab,
    policyd_run,
    run_specon,
    specon_policy,
)

pytestmark = pytest.mark.slow


def test_specon_migrates_the_converged_job_and_it_resumes(tmp_path: Path) -> None:
    shape = SpeConShape()
    with lab(tmp_path, engines=2, jobs=SPECON_JOBS, with_alertmanager=True) as world:
        assert world.alertmanager is not None
        with policyd_run(tmp_path / "policyd", specon_policy(), engines=world.engines,
                         prometheus_url=world.prometheus.url,
                         alertmanager_url=world.alertmanager.url) as policyd:
            move = run_specon(world, shape, policyd)
            log = policyd.text()
        print(f"\nSpeCon migration: checkpoint step {move.checkpoint_step}, resume step "
              f"{move.resume_step}, pause {move.pause_seconds:.2f} s, loss "
              f"{move.loss_first:.3f} (first) {move.loss_before:.4f} (before) "
              f"{move.loss_after:.4f} (after); moved "
              f"{move.old_died - move.converged_started:.1f} s after its start, finished "
              f"{move.finished - move.new_started:.1f} s after the move")
    # Algorithm 4 chose e2 (score 0, the minimum) and the engines show the move.
    assert 'from="e1"' in move.migrations_metric and 'to="e2"' in move.migrations_metric, log
    assert move.labels["policyd.io/migrated"] == "true"
    assert move.labels["policyd.io/migrated-from"] == "e1"
    # Resumed from the SIGTERM checkpoint, not restarted ...
    assert move.checkpoint_step > 0
    assert move.resume_step == move.checkpoint_step
    assert move.steps_after_max > move.resume_step >= move.steps_before > 0
    # ... with its loss going on from where it was (the smoothing window travels with it).
    assert abs(move.loss_after - move.loss_before) <= 0.25 * move.loss_before + 0.005, move
    assert move.loss_after < 0.1 * math.log(10), move  # a fresh model starts at ln(10) = 2.3
    # ... and finished on e2.
    assert move.exit_code == 0
    assert move.finished > move.new_started
    # The migration's alert is in Alertmanager with its labels.
    labels = [a["labels"] for a in move.alerts]
    assert {"alertname": "PolicydMigration", "policy": "e2e-specon", "job": SPECON_CONVERGED,
            "from": "e1", "to": "e2"}.items() <= labels[0].items(), labels
