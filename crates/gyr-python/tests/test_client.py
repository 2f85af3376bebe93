"""The API client: a Python program instrumented with gyr, steered from the test by
`gyr.connect` and by the `gyr` command, and the errors a user meets."""

import signal
import subprocess

import pytest

import gyr
from conftest import eventually


@pytest.fixture()
def program(run_program):
    return run_program(GYR_TEST_STEPS=0)


def phases(sub, want, limit=2000):
    """Reads py.step events until one has phase `want`; returns it."""
    for _ in range(limit):
        e = sub.next(timeout=10)
        assert e is not None, f"no event with phase {want!r}"
        if e["fields"]["phase"] == want:
            return e
    raise AssertionError(f"no event with phase {want!r} in {limit}")


def test_list_get_and_set_take_effect_at_the_synch_point(program):
    c = gyr.connect(program.pid)
    assert c.pid == program.pid and c.hello["can_steer"]
    listing = c.list()
    sim = next(o for o in listing["objects"] if o["name"] == "sim")
    dt = next(a for a in sim["attributes"] if a["name"] == "dt")
    assert (dt["type"], dt["unit"], dt["min"], dt["max"]) == ("float", "s", 0.0, 1.0)
    assert {a["name"] for a in sim["actuators"]} == {"scale", "boom"}
    assert any(f["name"] == "total" for f in listing["functions"])
    assert "sim.dt" in repr(listing) and "<table>" in listing._repr_html_()
    assert c.get("sim.dt") == 0.01
    with c.subscribe(["py.step"]) as sub:
        first = sub.next(timeout=10)
        assert first["type"] == "py.step"
        f = first["fields"]
        assert isinstance(f["step"], int) and isinstance(f["residual"], float)
        assert isinstance(f["phase"], str) and isinstance(f["ok"], bool)
        changes = c.set("sim.label", "steered")
        assert changes == [{"path": "sim.label", "old": "start", "new": "steered"}]
        e = phases(sub, "steered")
        assert e["fields"]["step"] > f["step"]
    c.set(sim__dt=0.5)
    assert eventually(lambda: c.get("sim.dt") == 0.5)
    step = c.get("sim.step")
    assert eventually(lambda: c.get("sim.step") > step, what="the program's step goes on")
    watched = list(c.watch(["sim.dt", "sim.step"], interval=0.01, count=2))
    assert len(watched) == 2 and watched[0]["sim.dt"] == 0.5


def test_actuators_and_functions_run_python_callbacks(program):
    c = gyr.connect(program.pid)
    assert c.call("sim.scale", 3) == pytest.approx(0.03)
    # The actuator changed the program's value: clients see it once it is exchanged.
    eventually(lambda: c.get("sim.dt") == pytest.approx(0.03), what="dt after the actuator")
    assert c.call("total", 1.5, 2) == 3.5
    # A callback that raises: the client gets its message, the program goes on.
    with pytest.raises(gyr.GyrError, match="boom from the program"):
        c.call("sim.boom")
    with pytest.raises(gyr.InvalidValueError, match="bad arguments"):
        c.call("total", 1.0)
    step = c.get("sim.step")
    assert eventually(lambda: c.get("sim.step") > step, what="the program goes on after the exception")
    c.set("sim.stop", True)
    _, err = program.finish()
    assert "RuntimeError: boom from the program" in err


def test_pause_step_and_resume(program):
    c = gyr.connect(program.pid)
    c.pause()
    s = c.wait_paused()
    assert s["at"] == "step"
    before = dict(c.status()["synch_points"]).get("step", 0)
    c.step(3)
    eventually(lambda: dict(c.status()["synch_points"]).get("step", 0) >= before + 3 and c.status()["state"] == "paused")
    after = dict(c.status()["synch_points"])["step"]
    assert after == before + 3
    # While paused the program's values stay put, and a value set reaches it at its next step.
    c.set("sim.label", "while-paused")
    with c.subscribe(["py.step"]) as sub:
        c.resume()
        phases(sub, "while-paused")
    assert c.status()["state"] == "running"


def test_ctrl_c_reaches_a_program_paused_at_its_synch_point(program):
    c = gyr.connect(program.pid)
    c.pause()
    assert c.wait_paused()["at"] == "step"
    program.proc.send_signal(signal.SIGINT)
    # Python's own KeyboardInterrupt, raised from inside gyr.sync_point, ends the program.
    out, err = program.proc.communicate(timeout=15)
    assert program.proc.returncode != 0, out
    assert "KeyboardInterrupt" in err and "sync_point" in err, err


def test_the_gyr_command_steers_the_python_program(program, gyr_bin):
    subprocess.run([gyr_bin, "set", str(program.pid), "sim.label", "from-cli"], check=True, capture_output=True)
    c = gyr.connect(program.pid)
    with c.subscribe("py.step") as sub:
        phases(sub, "from-cli")
    ls = subprocess.run([gyr_bin, "ls", str(program.pid)], check=True, capture_output=True, text=True)
    assert "sim.dt" in ls.stdout
    bad = subprocess.run([gyr_bin, "set", str(program.pid), "sim.dt", "7"], capture_output=True, text=True)
    assert bad.returncode != 0 and "out of range" in bad.stderr


def test_refusals_raise_the_matching_errors(program):
    c = gyr.connect(program.pid)
    with pytest.raises(gyr.InvalidValueError, match="out of range"):
        c.set("sim.dt", 5.0)
    with pytest.raises(gyr.InvalidValueError, match="read-only"):
        c.set("sim.step", 3)
    with pytest.raises(gyr.NotFoundError, match="no steering object named `nosuch`"):
        c.get("nosuch.x")
    with pytest.raises(gyr.NotFoundError, match="has no attribute `nope`"):
        c.set("sim.nope", 1)
    with pytest.raises(gyr.NotFoundError):
        c.call("sim.nothing")
    with pytest.raises(gyr.InvalidValueError):
        c.step(0)


def test_connecting_to_nothing_says_so(socket_dir):
    with pytest.raises(gyr.ConnectError, match="no gyr program with pid 1 is running"):
        gyr.connect(1)
    with pytest.raises(gyr.InvalidValueError, match="neither a pid"):
        gyr.connect("nonsense")
    with pytest.raises(gyr.InvalidValueError, match="token is empty"):
        gyr.connect("127.0.0.1:1", token="")


def test_tcp_needs_the_right_token(run_program):
    token = "python-test-token-0123456789"
    p = run_program(GYR_TEST_STEPS=0, GYR_LISTEN="127.0.0.1:0", GYR_TOKEN=token)
    addr = p.info["tcp"]
    with pytest.raises(gyr.AccessError):
        gyr.connect(addr, token="wrong-token-wrong-token-0000").get("sim.dt")
    c = gyr.connect(addr, token=token)
    assert c.get("sim.dt") == 0.01
    procs = c.processes()
    assert any(x["pid"] == p.pid for x in procs)
