"""Type stubs of gyr's extension module (the package ``gyr`` wraps it)."""

__version__: str

class GyrError(Exception):
    """An error of gyr's: the message says what was wrong and what to do."""

def trace_info_json(path: str | "os.PathLike[str]") -> str: ...

import os
