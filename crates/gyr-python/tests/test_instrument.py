"""Instrumentation: a Python program's sensors, spans, spec-file sensors and samples reach its
trace with their types; declarations and emits that cannot work are refused with gyr's
messages."""

import csv
import subprocess

import pytest

import gyr

SPEC = """
[[sensor]]
name = "py.spec"
fields = [{ name = "n", type = "u32" }, { name = "v", type = "f32" }]
"""


def read_table(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_traced_run_holds_every_event_with_its_values(tmp_path, run_program, gyr_bin):
    spec = tmp_path / "sensors.toml"
    spec.write_text(SPEC)
    trace = tmp_path / "run.gyr"
    p = run_program(GYR_TRACE=trace, GYR_TEST_STEPS=5, GYR_TEST_DELAY=0, GYR_TEST_SPEC=spec)
    out, _ = p.finish()
    assert "done 5" in out
    tables = tmp_path / "tables"
    subprocess.run(
        [gyr_bin, "trace", "export", "--format", "csv", str(trace), "-o", str(tables)],
        check=True,
        capture_output=True,
    )
    steps = read_table(tables / "py.step.csv")
    assert [int(r["step"]) for r in steps] == [0, 1, 2, 3, 4]
    assert [float(r["residual"]) for r in steps] == [1.0, 0.5, 1 / 3, 0.25, 0.2]
    assert {r["phase"] for r in steps} == {"start"}
    assert [r["ok"] for r in steps] == ["true", "false", "true", "false", "true"]
    assert "thread_name" in steps[0]

    spec_rows = read_table(tables / "py.spec.csv")
    assert [int(r["n"]) for r in spec_rows] == [0, 1, 2, 3, 4]
    assert float(spec_rows[1]["v"]) == 1.0

    begins = [r["name"] for r in read_table(tables / "gyr.span.begin.csv")]
    ends = [r["name"] for r in read_table(tables / "gyr.span.end.csv")]
    assert begins.count("work") == 5 and begins.count("solve") == 5
    assert sorted(begins) == sorted(ends)
    # The decorated function's span nests inside the block's.
    assert begins[:2] == ["work", "solve"]


@pytest.fixture()
def runtime():
    """A runtime in the test's process (sensors are on only while one runs)."""
    gyr.init(serve=False)
    yield
    gyr.shutdown()


def test_sensor_declarations_are_checked():
    s = gyr.Sensor("py.unit.decl", n="u8", x="f64")
    assert s.name == "py.unit.decl"
    assert s.fields == [("n", "u8"), ("x", "f64")]
    assert "n: u8" in repr(s)
    # The same declaration again is the same event type; other fields are refused.
    gyr.Sensor("py.unit.decl", [("n", "u8"), ("x", "f64")])
    with pytest.raises(gyr.InvalidValueError, match="py.unit.decl"):
        gyr.Sensor("py.unit.decl", n="u16")
    with pytest.raises(gyr.InvalidValueError, match="field `x` has type `float64`"):
        gyr.Sensor("py.unit.bad", x="float64")


def test_emits_that_do_not_fit_are_refused_with_the_field(runtime):
    s = gyr.Sensor("py.unit.emit", n="u8", x="f64", name="string", on="bool")
    s.emit(3, 0.5, "a", True)
    with pytest.raises(gyr.InvalidValueError, match=r"takes 4 fields \(n, x, name, on\), 2 given"):
        s.emit(1, 2.0)
    with pytest.raises(gyr.InvalidValueError, match="field `n`.*300 does not fit u8"):
        s.emit(300, 0.5, "a", True)
    with pytest.raises(gyr.InvalidValueError, match="field `n`"):
        s.emit(-1, 0.5, "a", True)
    with pytest.raises(gyr.InvalidValueError, match="field `x`"):
        s.emit(1, "fast", "a", True)
    with pytest.raises(gyr.InvalidValueError, match="field `name`"):
        s.emit(1, 0.5, 7, True)
    with pytest.raises(gyr.InvalidValueError, match="field `on`.*True or False"):
        s.emit(1, 0.5, "a", 1)
    fixed = gyr.Sensor("py.unit.fixed", a="i32", b="f32")
    with pytest.raises(gyr.InvalidValueError, match="field `a`"):
        fixed.emit(2**40, 1.0)
    # None is no field's value, wherever it stands.
    with pytest.raises(gyr.InvalidValueError, match=r"field `a` \(i32\) is None"):
        fixed.emit(None, 1.0)
    with pytest.raises(gyr.InvalidValueError, match=r"takes 2 fields \(a, b\), 1 given \(a None"):
        fixed.emit(1, None)
    with pytest.raises(gyr.InvalidValueError, match=r"takes 2 fields \(a, b\), 3 given"):
        fixed.emit(1, 1.0, 2)
    with pytest.raises(TypeError):
        fixed.emit(f0=1, f1=1.0)
    # Beyond the eighth field, fields come in a tuple: counted and checked all the same.
    wide = gyr.Sensor("py.unit.wide", [(f"c{i}", "u16") for i in range(10)])
    wide.emit(*range(10))
    with pytest.raises(gyr.InvalidValueError, match=r"takes 10 fields \(c0, .*, c9\), 9 given"):
        wide.emit(*range(9))
    with pytest.raises(gyr.InvalidValueError, match=r"takes 10 fields .*, 11 given"):
        wide.emit(*range(11))
    with pytest.raises(gyr.InvalidValueError, match="field `c9`"):
        wide.emit(*range(9), -1)
    with pytest.raises(gyr.InvalidValueError, match=r"field `c3` \(u16\) is None"):
        wide.emit(0, 1, 2, None, 4, 5, 6, 7, 8, 9)


def test_a_sensor_switched_off_records_nothing_and_checks_nothing(runtime):
    s = gyr.Sensor("py.unit.switch", n="u64")
    assert s.is_on
    s.enable(False)
    assert not s.is_on
    s.emit("not even a number")  # off: returns at once
    gyr.sensor_enable("py.unit.switch", True)
    assert s.is_on


def test_spec_files_are_checked(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[sensor]\n")
    with pytest.raises(gyr.InvalidValueError, match="1:"):
        gyr.load_spec(bad)
    with pytest.raises(gyr.InvalidValueError):
        gyr.load_spec(tmp_path / "missing.toml")


def test_objects_check_their_attributes():
    o = gyr.Object("unit_obj")
    o.attribute("dt", 0.1, unit="s", min=0.0, max=1.0)
    o.attribute("n", 3, read_only=True)
    assert o.dt == 0.1 and o.n == 3
    o.n = 4
    assert o.n == 4 and isinstance(o.n, int)
    with pytest.raises(gyr.InvalidValueError, match="above its maximum"):
        o.attribute("bad", 0.5, min=2.0, max=1.0)
    with pytest.raises(gyr.InvalidValueError, match="out of range"):
        o.attribute("far", 5.0, min=0.0, max=1.0)
    with pytest.raises(gyr.InvalidValueError, match="already registered"):
        o.attribute("dt", 0.2)
    with pytest.raises(gyr.InvalidValueError, match="unit_obj.n"):
        o.n = "many"
    with pytest.raises(AttributeError, match="has no attribute `nope`; its attributes: dt, n"):
        o.nope
    with pytest.raises(gyr.InvalidValueError, match="already registered"):
        gyr.Object("unit_obj")
    with pytest.raises(gyr.InvalidValueError, match="has type `text`"):
        o.actuator("act", lambda x: x, params="x: text")


def test_span_names_and_samples():
    with gyr.span("unit.span") as s:
        assert s.name == "unit.span"

    @gyr.instrument
    def f(x):
        return x + 1

    assert f(1) == 2
    i = gyr.sample("py.unit.sample_i", 3)
    i.set(7)
    assert i.get() == 7
    with pytest.raises(gyr.InvalidValueError, match="holds integers"):
        i.set(0.5)
    x = gyr.sample("py.unit.sample_f", 0.5)
    x.set(2)
    assert x.get() == 2.0


def test_python_rules_see_the_events_and_one_that_raises_does_not_stop_them(runtime, capfd):
    from conftest import eventually

    seen = []
    s = gyr.Sensor("py.unit.rule", level="f64")

    def bad(fields):
        raise ValueError("rule boom")

    gyr.on_event("py_high", "py.unit.rule", then=lambda f: seen.append(f["level"]), when=lambda f: f["level"] > 0.5)
    gyr.on_event("py_bad", "py.unit.rule", then=bad)
    try:
        for x in (0.1, 0.9, 0.7):
            s.emit(x)
        eventually(lambda: seen == [0.9, 0.7], what="the rule saw the high levels")
        err = []
        eventually(
            lambda: err.append(capfd.readouterr().err) or "rule boom" in "".join(err),
            what="the raising rule's traceback",
        )
    finally:
        gyr.remove_rule("py_high")
        gyr.remove_rule("py_bad")
    with pytest.raises(gyr.InvalidValueError, match="already registered"):
        gyr.on_event("dup", "py.unit.rule", then=print)
        gyr.on_event("dup", "py.unit.rule", then=print)
    gyr.remove_rule("dup")


def test_messages_are_recorded(runtime):
    gyr.msg.init("py-job", 0, 2)
    gyr.msg.send(1, 7, 64)
    gyr.msg.recv(1, 8, 32)


def test_a_rules_file_actuates_a_python_function(runtime, tmp_path):
    from conftest import eventually

    got = []
    gyr.function("py_rule_fn", lambda level: got.append(level), params=[("level", "float")])
    s = gyr.Sensor("py.unit.rules", level="f64")
    f = tmp_path / "rules.toml"
    f.write_text(
        '[[rule]]\nname = "high"\non = "py.unit.rules"\n'
        "when = 'level > 0.5'\nthen = 'actuate(\"py_rule_fn\", level);'\n"
    )
    rules = gyr.load_rules(f)
    try:
        s.emit(0.2)
        s.emit(0.8)
        eventually(lambda: got == [0.8], what="the rule called the Python function")
        assert rules.state()["rules"][0]["name"] == "high"
    finally:
        rules.unload()
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rule]]\nname = \n")
    with pytest.raises(gyr.InvalidValueError, match="bad.toml"):
        gyr.load_rules(bad)


def traced_run(tmp_path, name, script):
    """Runs `script` (Python, given its trace's path) in a process of its own; returns the path."""
    import sys

    trace = tmp_path / f"{name}.gyr"
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    subprocess.run([sys.executable, str(path), str(trace)], check=True, capture_output=True, timeout=60)
    return trace


THREADS = """
import sys, threading
import gyr
gyr.init(trace=sys.argv[1], serve=False)
s = gyr.Sensor("py.ping", n="u32")
s.emit(0)
def work(n):
    s.emit(n)
workers = [threading.Thread(target=work, args=(1,), name="reader-7"), threading.Thread(target=work, args=(2,))]
for w in workers:
    w.start()
    w.join()
gyr.shutdown()
"""


def test_threads_are_named_as_threading_names_them(tmp_path):
    trace = traced_run(tmp_path, "threads", THREADS)
    table = gyr.read_trace(trace, events=["py.ping"])["py.ping"].to_pandas()
    names = dict(zip(table["n"], table["thread_name"]))
    assert names[0] == "MainThread", names
    assert names[1] == "reader-7", names
    assert names[2].startswith("Thread-") and "(work)" in names[2], names


WIDTHS = """
import sys
import gyr
gyr.init(trace=sys.argv[1], serve=False)
# Every field count, on both sides of the eighth field, and a field of every scalar type.
for k in range(1, 12):
    gyr.Sensor(f"py.width{k}", [(f"c{i}", "i64") for i in range(k)]).emit(*range(-1, k - 1))
types = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64", "bool"]
gyr.Sensor("py.every", [(t, t) for t in types]).emit(-8, -16, -32, -2**63, 8, 16, 32, 2**64 - 1, 0.5, 0.25, True)
gyr.Sensor("py.eight", [(t, t) for t in types[:8]]).emit(-8, -16, -32, -2**63, 8, 16, 32, 2**64 - 1)
gyr.shutdown()
"""


def test_every_field_count_and_scalar_type_reaches_the_trace(tmp_path):
    trace = traced_run(tmp_path, "widths", WIDTHS)
    tables = gyr.read_trace(trace)
    for k in range(1, 12):
        row = tables[f"py.width{k}"].to_pylist()[0]
        assert [row[f"c{i}"] for i in range(k)] == list(range(-1, k - 1)), k
    every = tables["py.every"].to_pylist()[0]
    values = [-8, -16, -32, -(2**63), 8, 16, 32, 2**64 - 1, 0.5, 0.25, True]
    types = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64", "bool"]
    assert [every[t] for t in types] == values
    eight = tables["py.eight"].to_pylist()[0]
    assert [eight[t] for t in types[:8]] == values[:8]
