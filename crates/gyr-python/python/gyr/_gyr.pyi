"""Type stubs of gyr's extension module (the package ``gyr`` wraps it)."""

import os
from typing import List, Optional, Tuple, Union

__version__: str

class GyrError(Exception):
    """An error of gyr's: the message says what was wrong and what to do."""

class ArrowTable:
    """One event type's table, exported through the Arrow PyCapsule interface."""

    @property
    def name(self) -> str: ...
    @property
    def num_rows(self) -> int: ...
    @property
    def column_names(self) -> List[str]: ...
    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object: ...

def read_tables(
    paths: List[Union[str, "os.PathLike[str]"]],
    events: Optional[List[str]] = None,
    ordered: bool = False,
    correct: bool = False,
) -> Tuple[List[ArrowTable], int, int]: ...
def trace_info_json(path: Union[str, "os.PathLike[str]"]) -> str: ...
