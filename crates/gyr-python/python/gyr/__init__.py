"""gyr from Python: read trace files into typed Arrow, pandas and polars tables.

A program run with ``GYR_TRACE=run.gyr`` writes a trace file; read it with::

    import gyr
    trace = gyr.read_trace("run.gyr")     # {event type: pyarrow.Table}
    trace["heat.step"].num_rows
    frames = trace.to_pandas()            # {event type: pandas.DataFrame}
    frames = trace.to_polars()            # {event type: polars.DataFrame}
    gyr.trace_info("run.gyr")             # what ``gyr trace info --json`` prints

Instrument a Python program (sensors, spans, steering objects, synch points, rules) with
``gyr.init()``, ``gyr.Sensor``, ``gyr.span``, ``gyr.Object`` and ``gyr.sync_point``; steer and
watch any gyr program with ``gyr.connect(PID)``.

Each table holds every record of one event type, with the columns every record has --
``time_ns`` (uint64, ns since the process's timestamp 0), ``wall_time`` (timestamp[ns, UTC]),
``pid``, ``thread``, ``thread_name``, ``seq``, ``perturbation_ns`` -- then one column per field,
typed as the event type declares it (u64 stays uint64, i64 int64, f64 float64, bool, strings
utf8, bytes binary; an array ``[T; N]`` becomes ``N`` columns ``name_0`` ..). The tables come
from gyr's Rust reader through the Arrow C stream interface, without copying a value through
Python. Their columns are built on several threads while the file is read (``threads=``: the
cores available by default, at most 8; ``threads=1`` builds them on the reading thread), the
rows of each table in file order whatever the threads.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Sequence, Union

from . import _gyr
from ._gyr import ArrowTable, GyrError

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import polars
    import pyarrow

__version__: str = _gyr.__version__

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["ArrowTable", "GyrError", "Trace", "read_trace", "trace_info", "__version__"]

from ._instrument import *  # noqa: E402,F401,F403  (sensors, spans, steering, rules)
from ._instrument import __all__ as _instrument_all  # noqa: E402
from ._client import *  # noqa: E402,F401,F403  (the API client)
from ._client import __all__ as _client_all  # noqa: E402

__all__ += _instrument_all + _client_all


def _need(module: str, extra: str) -> Any:
    try:
        return __import__(module)
    except ImportError as e:
        raise GyrError(
            f"{module} is not installed: install it with `pip install {module}` "
            f"(or the package's extra: `pip install ./crates/gyr-python[{extra}]`)"
        ) from e


class Trace(Dict[str, "pyarrow.Table"]):
    """The tables of a trace: a dict from event type name to ``pyarrow.Table``, in the order
    the types were first seen.

    ``rows`` is the number of records read into tables; ``skipped`` the records left out
    (a payload not matching its type, or a type never described).
    """

    rows: int
    skipped: int

    def __init__(self, tables: Iterable[tuple], rows: int, skipped: int) -> None:
        super().__init__(tables)
        self.rows = rows
        self.skipped = skipped

    def to_pandas(self, **kwargs: Any) -> Dict[str, "pandas.DataFrame"]:
        """One ``pandas.DataFrame`` per event type (``pyarrow.Table.to_pandas(**kwargs)``):
        integers stay integers of their width, ``wall_time`` is ``datetime64[ns, UTC]``."""
        _need("pandas", "pandas")
        return {name: table.to_pandas(**kwargs) for name, table in self.items()}

    def to_polars(self) -> Dict[str, "polars.DataFrame"]:
        """One ``polars.DataFrame`` per event type, converted from Arrow without copying."""
        pl = _need("polars", "polars")
        return {name: pl.from_arrow(table) for name, table in self.items()}

    def __repr__(self) -> str:
        tables = ", ".join(f"{name!r}: {t.num_rows} rows" for name, t in self.items())
        return f"Trace({{{tables}}}, rows={self.rows}, skipped={self.skipped})"


def read_trace(
    path: Union[PathLike, Sequence[PathLike]],
    *,
    events: Optional[Iterable[str]] = None,
    ordered: bool = False,
    correct: bool = False,
    threads: Optional[int] = None,
) -> Trace:
    """Reads the trace file at ``path`` into one typed ``pyarrow.Table`` per event type.

    ``path`` may also be a list of files, one process each (the ranks of an MPI job): their
    rows share the tables of their event types, placed on one clock by the files' wall-clock
    anchors, with ``pid`` telling them apart.

    ``events`` names the event types to keep (``["heat.step", "gyr.lost"]``); the others are
    read past. ``ordered`` runs the records through gyr's ordering filter first (every event
    after its causes); ``correct`` removes from each thread's timeline the time monitoring
    took (and implies ``ordered``), as ``gyr trace export --correct`` does. ``threads`` is
    how many threads build the columns while the file is read (default: the cores available,
    at most 8; ``1`` builds them on the reading thread); the tables are the same either way.

    The file is read with the GIL released. Raises :class:`GyrError` with gyr's message when a
    file is missing, unreadable or not a gyr trace, and when pyarrow (15 or later) is missing.
    """
    pa = _need("pyarrow", "arrow")
    if isinstance(path, (str, bytes, os.PathLike)):
        paths = [os.fspath(path)]
    else:
        paths = [os.fspath(p) for p in path]
    if isinstance(events, str):
        events = [events]
    names = None if events is None else [str(e) for e in events]
    tables, rows, skipped = _gyr.read_tables(
        paths, events=names, ordered=ordered, correct=correct, threads=threads
    )
    from_stream = getattr(pa.RecordBatchReader, "from_stream", None)
    if from_stream is None:
        raise GyrError(
            f"pyarrow {pa.__version__} cannot import Arrow C streams: "
            "upgrade it with `pip install 'pyarrow>=15'`"
        )
    return Trace(((t.name, from_stream(t).read_all()) for t in tables), rows, skipped)


def trace_info(path: PathLike) -> Dict[str, Any]:
    """What the trace file at ``path`` holds: header, schemas, threads, record counts, losses
    and damage, as the object ``gyr trace info --json`` prints.

    Raises :class:`GyrError` when the file cannot be opened or is not a gyr trace.
    """
    return json.loads(_gyr.trace_info_json(os.fspath(path)))
