"""Fixtures of the package's tests: the `gyr` binary and traces it writes.

The binary is `GYR_BIN`, or the one `cargo build -p gyr-cli` (or `cargo test --workspace`)
leaves in the workspace's target directory. Without it the tests that need it are skipped,
except in CI (`CI=true`), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "crates" / "gyr-core" / "tests" / "data" / "v2.gyr"


def _gyr_binary() -> Path | None:
    env = os.environ.get("GYR_BIN")
    if env:
        return Path(env)
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "gyr"
        if p.is_file() and os.access(p, os.X_OK):
            return p
    found = shutil.which("gyr")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def gyr_bin() -> Path:
    p = _gyr_binary()
    if p is None:
        why = "no gyr binary: build it with `cargo build -p gyr-cli` or set GYR_BIN"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return p


@pytest.fixture(scope="session")
def heat_trace(gyr_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace of a real program: the heat-diffusion solver on three named threads."""
    d = tmp_path_factory.mktemp("heat")
    trace = d / "heat.gyr"
    subprocess.run(
        [str(gyr_bin), "demo", "heat", "--size", "64", "--domains", "3", "--steps", "150",
         "--trace", str(trace)],
        check=True, capture_output=True, timeout=120,
    )
    return trace


@pytest.fixture(scope="session")
def heat_csv(gyr_bin: Path, heat_trace: Path) -> Path:
    """The same trace as `gyr trace export --format csv` writes it."""
    out = heat_trace.parent / "csv"
    subprocess.run(
        [str(gyr_bin), "trace", "export", "--format", "csv", str(heat_trace), "-o", str(out)],
        check=True, capture_output=True, timeout=120,
    )
    return out
