"""gyr from Python.

Read a trace file (written by a program run with ``GYR_TRACE=run.gyr``)::

    import gyr
    info = gyr.trace_info("run.gyr")      # what ``gyr trace info --json`` prints
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Union

from . import _gyr
from ._gyr import GyrError

__version__: str = _gyr.__version__

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["GyrError", "trace_info", "__version__"]


def trace_info(path: PathLike) -> Dict[str, Any]:
    """What the trace file at ``path`` holds: header, schemas, threads, record counts, losses
    and damage, as the object ``gyr trace info --json`` prints.

    Raises :class:`GyrError` when the file cannot be opened or is not a gyr trace.
    """
    return json.loads(_gyr.trace_info_json(os.fspath(path)))
