"""The embedded world: a discrete-event cluster in virtual time, driven by real loss curves.

The simulator is both a source (it yields the Snapshot the daemon would get from Prometheus) and
an actuator (it applies the engine's Actions), and it drives the same `policyd.tick.tick` as the
daemon. No policy logic lives here: the world only shares CPU, runs jobs, pauses them for
migrations and measures the outcome.
"""
