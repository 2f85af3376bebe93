"""Fixtures of the package's tests: the `gyr` binary and traces it writes, and an
instrumented Python program (`solver.py`) run as a subprocess with an announcement directory
of the test's own.

The binary is `GYR_BIN`, or the one `cargo build -p gyr-cli` (or `cargo test --workspace`)
leaves in the workspace's target directory. Without it the tests that need it are skipped,
except in CI (`CI=true`), where they fail.
"""

from __future__ import annotations

import os
import shutil
import json
import subprocess
import sys
import time
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


HERE = Path(__file__).resolve().parent


@pytest.fixture()
def socket_dir(tmp_path, monkeypatch):
    """An announcement directory for this test alone, for the program and the client."""
    d = tmp_path / "sockets"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("GYR_SOCKET_DIR", str(d))
    return d


class Program:
    """The instrumented program `solver.py`, running; `info` is what its `gyr.init()` said."""

    def __init__(self, env):
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "solver.py")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line.startswith("ready "):
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"the program did not start: {line}{out}\n{err}")
        self.info = json.loads(line[len("ready "):])
        self.pid = self.proc.pid

    def finish(self, timeout=30.0):
        """Waits for the end; returns (stdout, stderr)."""
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}\n{out}\n{err}"
        return out, err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture()
def run_program(socket_dir):
    """Starts `solver.py` with extra environment variables; kills what is left at the end."""
    started = []

    def start(**env_vars):
        env = dict(os.environ)
        env.update({k: str(v) for k, v in env_vars.items()})
        p = Program(env)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


def eventually(check, timeout=15.0, what="the condition"):
    """Calls `check` until it returns something true; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.02)
    raise AssertionError(f"{what} did not hold within {timeout} s (last: {last!r})")
