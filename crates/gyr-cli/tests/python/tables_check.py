"""Loads the tables of `gyr trace export --format csv|parquet` with pandas and polars (and
pyarrow for Parquet) as a user would, and checks them against `gyr trace info --json`: one
table per event type, a row per record, and each column of the type its field has.

    tables_check.py DIR csv|parquet INFO.json

Prints one line per table, then `ok`; exits non-zero with the first mismatch.
"""

import json
import re
import sys
from pathlib import Path

import pandas as pd
import polars as pl

INTS = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}
FLOATS = {"f32", "f64"}


def columns(fields):
    """(column, gyr scalar type or 'string'/'bytes') of each field, as the export names them."""
    fixed = {"time_ns", "wall_time", "pid", "thread", "thread_name", "seq", "perturbation_ns"}
    taken = set(fixed)
    out = []

    def unique(name):
        if name in taken:
            name += "_field"
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    for f in fields:
        m = re.fullmatch(r"\[(\w+); (\d+)\]", f["type"])
        if m:
            for i in range(int(m.group(2))):
                out.append((unique(f"{f['name']}_{i}"), m.group(1)))
        else:
            out.append((unique(f["name"]), f["type"]))
    return out


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def is_strings(series):
    return pd.api.types.is_string_dtype(series.dtype) or series.isna().all()


def main():
    out_dir, fmt, info_path = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    info = json.loads(Path(info_path).read_text())
    total = 0
    for s in info["schemas"]:
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", s["name"])
        path = out_dir / f"{stem}.{fmt}"
        check(path.exists(), f"no table {path} for event type {s['name']}")
        records = s["records"]["records"]
        cols = columns(s["fields"])
        if fmt == "csv":
            pdf = pd.read_csv(path, keep_default_na=True)
            plf = pl.read_csv(path)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            check(table.num_rows == records, f"{path}: pyarrow reads {table.num_rows} rows, not {records}")
            arrow = {
                "i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(),
                "u8": pa.uint8(), "u16": pa.uint16(), "u32": pa.uint32(), "u64": pa.uint64(),
                "f32": pa.float32(), "f64": pa.float64(), "bool": pa.bool_(),
                "string": pa.string(), "bytes": pa.binary(),
            }
            check(table.schema.field("time_ns").type == pa.uint64(), f"{path}: time_ns")
            check(table.schema.field("wall_time").type == pa.timestamp("ns", tz="UTC"),
                  f"{path}: wall_time is {table.schema.field('wall_time').type}")
            for name, ty in cols:
                got = table.schema.field(name).type
                check(got == arrow[ty], f"{path}: pyarrow reads {name} ({ty}) as {got}")
            pdf = pd.read_parquet(path)
            plf = pl.read_parquet(path)
        check(len(pdf) == records, f"{path}: pandas reads {len(pdf)} rows, not {records}")
        check(plf.height == records, f"{path}: polars reads {plf.height} rows, not {records}")
        check(list(pdf.columns)[:7] == ["time_ns", "wall_time", "pid", "thread", "thread_name",
                                        "seq", "perturbation_ns"], f"{path}: columns {list(pdf.columns)}")
        check(list(pdf.columns)[7:] == [c for c, _ in cols], f"{path}: field columns {list(pdf.columns)}")
        if records:
            check(pd.api.types.is_integer_dtype(pdf["time_ns"].dtype), f"{path}: pandas time_ns {pdf['time_ns'].dtype}")
            check(is_strings(pdf["thread_name"]), f"{path}: pandas thread_name {pdf['thread_name'].dtype}")
            check(plf.schema["thread_name"] in (pl.String, pl.Null), f"{path}: polars thread_name")
        for name, ty in cols:
            if not records:
                break
            pd_t, pl_t = pdf[name].dtype, plf.schema[name]
            if fmt == "csv":
                # Text carries no widths: every integer reads as int64, every float as float64.
                want_pd = {**{t: "int64" for t in INTS}, "f32": "float64", "f64": "float64", "bool": "bool"}
                want_pl = {**{t: pl.Int64 for t in INTS}, "f32": pl.Float64, "f64": pl.Float64,
                           "bool": pl.Boolean}
            else:
                want_pd = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                           "u16": "uint16", "u32": "uint32", "u64": "uint64", "f32": "float32",
                           "f64": "float64", "bool": "bool"}
                want_pl = {"i8": pl.Int8, "i16": pl.Int16, "i32": pl.Int32, "i64": pl.Int64,
                           "u8": pl.UInt8, "u16": pl.UInt16, "u32": pl.UInt32, "u64": pl.UInt64,
                           "f32": pl.Float32, "f64": pl.Float64, "bool": pl.Boolean}
            if ty in want_pd:
                check(str(pd_t) == want_pd[ty], f"{path}: pandas reads {name} ({ty}) as {pd_t}")
                check(pl_t == want_pl[ty], f"{path}: polars reads {name} ({ty}) as {pl_t}")
            elif ty == "string":
                check(is_strings(pdf[name]), f"{path}: pandas reads {name} (string) as {pd_t}")
                check(pl_t in (pl.String, pl.Null), f"{path}: polars reads {name} (string) as {pl_t}")
            elif ty == "bytes" and fmt == "parquet":
                check(pl_t == pl.Binary, f"{path}: polars reads {name} (bytes) as {pl_t}")
        total += records
        print(f"{s['name']}: {records} rows, {len(cols)} field columns")
    check(total == info["records"]["records"], f"{total} rows in all, not {info['records']['records']}")
    print("ok")


main()
