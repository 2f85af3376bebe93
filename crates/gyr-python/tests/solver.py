"""A Python program instrumented with gyr, for the tests: a solver loop with a sensor, a spec
file's sensor, spans, a sample, a steering object with actuators, and a function.

It runs ``GYR_TEST_STEPS`` steps (for ever when 0) and stops when a client sets
``sim.stop``. It prints one line, ``ready PID``, once its objects are registered.
"""

import os
import sys
import time

import gyr

steps = int(os.environ.get("GYR_TEST_STEPS", "0"))
delay = float(os.environ.get("GYR_TEST_DELAY", "0.005"))

info = gyr.init()

step_sensor = gyr.Sensor("py.step", step="u64", residual="f64", phase="string", ok="bool")
spec = os.environ.get("GYR_TEST_SPEC")
spec_sensors = gyr.load_spec(spec) if spec else {}
load = gyr.sample("py.load", 0.0)

sim = gyr.Object("sim", "the test solver")
sim.attribute("dt", 0.01, unit="s", min=0.0, max=1.0, description="time step")
sim.attribute("step", 0, read_only=True)
sim.attribute("stop", False)
sim.attribute("label", "start")


@sim.actuator
def scale(by: float):
    """Multiplies dt."""
    sim.dt = sim.dt * by
    return sim.dt


@sim.actuator
def boom():
    raise RuntimeError("boom from the program")


@gyr.function
def total(a: float, b: int):
    return a + b


@gyr.span("solve")
def solve(i):
    return 1.0 / (i + 1)


import json
print("ready", json.dumps(info), flush=True)
i = 0
while steps == 0 or i < steps:
    gyr.sync_point("step")
    if sim.stop:
        break
    with gyr.span("work"):
        r = solve(i)
    step_sensor.emit(i, r, sim.label, i % 2 == 0)
    for s in spec_sensors.values():
        s.emit(i, r * 2)
    load.set(r)
    sim.step = i
    i += 1
    time.sleep(delay)
print("done", i, flush=True)
