"""Actuators: a Decision's actions turned into effects (policyd.tick.Actuator).

`dry_run.DryRunActuator` records and logs; `docker` acts on Docker engines; the simulator is an
actuator of its own (policyd.sim). Actuators never import sources, the simulator, the daemon or
the CLI.
"""
