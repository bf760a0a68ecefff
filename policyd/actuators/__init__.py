"""Actuators: a Decision's actions turned into effects (policyd.tick.Actuator).

`docker` acts on Docker engines, `kubernetes` on a Kubernetes API server; the simulator is an
actuator of its own (policyd.sim), and the dry-run actuator lives with the tick
(`policyd.tick.DryRunActuator`: the tick routes every dry-run decision to it). Actuators never
import sources, the simulator, the daemon or the CLI.
"""
