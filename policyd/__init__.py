"""policyd: declarative FlowCon and SpeCon policies for deep-learning training jobs.

The pure core is `policyd.engine.decide(policy, snapshot) -> Decision`; everything else turns
the outside world into a `Snapshot` (sources) or a `Decision` into effects (actuators).
"""

__version__ = "0.1.0"
