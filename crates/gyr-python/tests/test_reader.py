"""gyr.read_trace and gyr.trace_info: typed tables, checked against the golden trace file of
gyr-core's format tests and against `gyr trace export --format csv` of a real program's trace."""

from __future__ import annotations

import csv
import datetime as dt
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import gyr

from conftest import GOLDEN

FIXED = ["time_ns", "wall_time", "pid", "thread", "thread_name", "seq", "perturbation_ns"]
START_NS = 1_700_000_000_000_000_000

# gyr's field types (`gyr trace info --json`) and the Arrow types their columns must have.
ARROW_OF = {
    "u8": pa.uint8(), "u16": pa.uint16(), "u32": pa.uint32(), "u64": pa.uint64(),
    "i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(),
    "f32": pa.float32(), "f64": pa.float64(), "bool": pa.bool_(),
    "string": pa.utf8(), "bytes": pa.binary(),
}


def test_version_and_error_type():
    assert gyr.__version__ == gyr._gyr.__version__
    assert issubclass(gyr.GyrError, Exception)


def test_golden_file_columns_have_gyr_types_and_values():
    t = gyr.read_trace(GOLDEN)
    assert list(t) == ["gyr.lost", "work_load", "note", "tick"]
    assert t.rows == 8 and t.skipped == 0

    work = t["work_load"]
    assert work.column_names == FIXED + ["domain", "load"]
    assert work.schema.field("time_ns").type == pa.uint64()
    assert work.schema.field("wall_time").type == pa.timestamp("ns", tz="UTC")
    assert work.schema.field("pid").type == pa.uint32()
    assert work.schema.field("thread").type == pa.uint64()
    assert work.schema.field("thread_name").type == pa.utf8()
    assert work.schema.field("domain").type == pa.uint32()
    assert work.schema.field("load").type == pa.float64()
    assert work["time_ns"].to_pylist() == [1000, 5000, 5040, 6000]
    assert work["domain"].to_pylist() == [3, 4, 5, 6]
    assert work["load"].to_pylist() == [0.75, 1.5, -2.0, 0.0]
    assert work["seq"].to_pylist() == [1, 8, 9, 2]
    assert work["perturbation_ns"].to_pylist() == [0, 0, 0, 7]
    assert set(work["pid"].to_pylist()) == {4242}
    assert set(work["thread_name"].to_pylist()) == {"main"}
    wall = work["wall_time"].cast(pa.int64()).to_pylist()
    assert wall == [START_NS + ns for ns in (1000, 5000, 5040, 6000)]

    note = t["note"]
    assert note.column_names == FIXED + ["text", "raw", "pair_0", "pair_1"]
    assert note.schema.field("text").type == pa.utf8()
    assert note.schema.field("raw").type == pa.binary()
    assert note.schema.field("pair_0").type == pa.int16()
    row = note.to_pylist()[0]
    assert {k: row[k] for k in ("text", "raw", "pair_0", "pair_1")} == {
        "text": "héllo", "raw": b"\x01\x02", "pair_0": -1, "pair_1": 2,
    }

    lost = t["gyr.lost"]
    assert lost.to_pylist()[0]["count"] == 5
    # Thread 2 is known only from its records: no name.
    assert lost["thread_name"].to_pylist() == [None]
    assert t["tick"].num_rows == 2 and t["tick"].column_names == FIXED


def test_events_keeps_only_the_types_named():
    t = gyr.read_trace(GOLDEN, events=["note", "tick", "no-such-type"])
    assert list(t) == ["note", "tick"]
    assert t.rows == 3 and t.skipped == 0
    assert list(gyr.read_trace(GOLDEN, events="tick")) == ["tick"]


def test_tables_come_through_the_arrow_c_stream_interface():
    tables, rows, skipped = gyr._gyr.read_tables([str(GOLDEN)])
    assert (rows, skipped) == (8, 0)
    work = next(x for x in tables if x.name == "work_load")
    assert work.num_rows == 4 and "load" in work.column_names
    # Any consumer of the PyCapsule protocol, not only the package's own wrapper.
    table = pa.RecordBatchReader.from_stream(work).read_all()
    assert table["domain"].to_pylist() == [3, 4, 5, 6]
    # The stream can be taken more than once: the batches are shared.
    assert pa.RecordBatchReader.from_stream(work).read_all().equals(table)
    assert "work_load" in repr(work)


def test_pandas_and_polars_keep_the_types():
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    t = gyr.read_trace(GOLDEN)
    frames = t.to_pandas()
    df = frames["work_load"]
    assert str(df["time_ns"].dtype) == "uint64"
    assert str(df["domain"].dtype) == "uint32"
    assert str(df["load"].dtype) == "float64"
    assert isinstance(df["wall_time"].dtype, pd.DatetimeTZDtype)
    assert df["wall_time"].iloc[0] == pd.Timestamp(START_NS + 1000, unit="ns", tz="UTC")
    assert frames["note"]["text"].iloc[0] == "héllo"
    pframes = t.to_polars()
    p = pframes["work_load"]
    assert p.schema["time_ns"] == pl.UInt64
    assert p.schema["domain"] == pl.UInt32
    assert p.schema["thread_name"] == pl.String
    assert p.schema["wall_time"] == pl.Datetime("ns", "UTC")
    assert p["load"].to_list() == [0.75, 1.5, -2.0, 0.0]
    assert pframes["note"]["pair_0"].dtype == pl.Int16


def test_trace_info_is_what_the_command_prints(gyr_bin):
    import json
    import subprocess

    info = gyr.trace_info(GOLDEN)
    assert info["header"]["pid"] == 4242
    assert [s["name"] for s in info["schemas"]] == ["gyr.lost", "work_load", "note", "tick"]
    out = subprocess.run(
        [str(gyr_bin), "trace", "info", "--json", str(GOLDEN)],
        check=True, capture_output=True, text=True,
    ).stdout
    assert json.loads(out) == info


def _csv_rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _rfc3339(ns: int) -> str:
    """ns since the Unix epoch as the CSV export writes it."""
    secs = dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=dt.timezone.utc)
    return f"{secs:%Y-%m-%dT%H:%M:%S}.{ns % 1_000_000_000:09d}Z"


def test_a_real_programs_trace_matches_the_csv_export(heat_trace, heat_csv):
    t = gyr.read_trace(heat_trace)
    info = gyr.trace_info(heat_trace)
    files = {p.stem: p for p in heat_csv.glob("*.csv")}
    assert set(files) == {name.replace("#", "_") for name in t}
    schemas = {s["name"]: s for s in info["schemas"]}
    for name, table in t.items():
        rows = _csv_rows(files[name])
        assert table.num_rows == len(rows), name
        # Every field's column has the Arrow type of its gyr type.
        for f in schemas[name]["fields"]:
            assert table.schema.field(f["name"]).type == ARROW_OF[f["type"]], (name, f)
        if not rows:
            continue
        assert table.column_names == list(rows[0].keys())
        got = table.to_pylist()
        wall = table["wall_time"].cast(pa.int64()).to_pylist()
        for g, w, r in zip(got, wall, rows):
            for col, text in r.items():
                v = g[col]
                if col == "wall_time":
                    assert _rfc3339(w) == text, (name, col)
                elif v is None:
                    assert text == "", (name, col)
                elif isinstance(v, float):
                    assert v == float(text), (name, col)
                else:
                    assert str(v) == text, (name, col)


def test_thread_names_and_wall_clock_of_a_real_program(heat_trace):
    t = gyr.read_trace(heat_trace, events=["work_load"])
    work = t["work_load"]
    assert work.num_rows > 0
    names = set(work["thread_name"].to_pylist())
    assert names == {"domain-0", "domain-1", "domain-2"}
    # Each domain runs on its own thread.
    by_domain = {}
    for d, n in zip(work["domain"].to_pylist(), work["thread_name"].to_pylist()):
        by_domain.setdefault(d, set()).add(n)
    assert by_domain == {d: {f"domain-{d}"} for d in range(3)}
    start = gyr.trace_info(heat_trace)["header"]["start_unix_ns"]
    ns = work["time_ns"].to_pylist()
    wall = work["wall_time"].cast(pa.int64()).to_pylist()
    assert wall == [start + x for x in ns]
    first = dt.datetime.fromtimestamp(wall[0] / 1e9, tz=dt.timezone.utc)
    assert abs((dt.datetime.now(dt.timezone.utc) - first).total_seconds()) < 3600


def test_ordered_and_corrected_reads_keep_every_record(heat_trace):
    plain = gyr.read_trace(heat_trace)
    corrected = gyr.read_trace(heat_trace, correct=True)
    assert corrected.rows == plain.rows
    assert {n: x.num_rows for n, x in corrected.items()} == {n: x.num_rows for n, x in plain.items()}


def test_tables_are_the_same_on_any_number_of_threads(heat_trace):
    alone = gyr.read_trace(heat_trace, threads=1)
    for n in (2, 3, None):
        built = gyr.read_trace(heat_trace, threads=n)
        assert (built.rows, built.skipped) == (alone.rows, alone.skipped)
        assert list(built) == list(alone)
        for name, table in alone.items():
            assert built[name].equals(table), name
    with pytest.raises(gyr.GyrError, match="threads=0"):
        gyr.read_trace(heat_trace, threads=0)


def test_concurrent_reads_agree(heat_trace):
    # Reads run with the GIL released: two at once on two threads finish and agree.
    results = []

    def read():
        results.append(gyr.read_trace(heat_trace).rows)

    threads = [threading.Thread(target=read) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 2 and results[0] == results[1] > 0


def test_missing_file_raises_gyr_error(tmp_path):
    missing = tmp_path / "nope.gyr"
    with pytest.raises(gyr.GyrError, match="nope.gyr"):
        gyr.read_trace(missing)
    with pytest.raises(gyr.GyrError, match="nope.gyr"):
        gyr.trace_info(missing)


def test_corrupt_file_raises_gyr_error(tmp_path):
    bad = tmp_path / "bad.gyr"
    bad.write_bytes(b"this is not a trace file at all\n" * 10)
    with pytest.raises(gyr.GyrError) as e:
        gyr.read_trace(bad)
    assert "bad.gyr" in str(e.value)
    with pytest.raises(gyr.GyrError):
        gyr.trace_info(bad)


def test_empty_list_of_files_is_refused():
    with pytest.raises(gyr.GyrError, match="no trace file"):
        gyr.read_trace([])


def test_several_files_share_tables(tmp_path):
    t = gyr.read_trace([GOLDEN, GOLDEN])
    assert t.rows == 16
    assert t["work_load"].num_rows == 8
