"""The client of gyr's API: connect to a running program (or a hub) and list, read, set,
call, pause, step, watch and subscribe, from a script or a Jupyter notebook.

Every call waits without holding the GIL; a subscription stops on Ctrl-C. Refusals raise
:class:`GyrError` subclasses carrying gyr's message: :class:`ConnectError`,
:class:`AccessError` (token), :class:`NotFoundError` (unknown path),
:class:`InvalidValueError` (out of range, wrong type, read-only).
"""

from __future__ import annotations

import html
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _gyr
from ._gyr import Subscription

__all__ = ["Client", "Listing", "Subscription", "connect"]


def _table(headers: Sequence[str], rows: List[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape('' if c is None else str(c))}</td>" for c in r) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class Listing(dict):
    """What :meth:`Client.list` returns: a dict with ``objects`` and ``functions``, shown as
    a table in Jupyter and as ``gyr ls`` shows it in a terminal."""

    def rows(self) -> List[List[Any]]:
        out = []
        for o in self["objects"]:
            for a in o["attributes"]:
                rng = ""
                if a["min"] is not None or a["max"] is not None:
                    lo = "" if a["min"] is None else a["min"]
                    hi = "" if a["max"] is None else a["max"]
                    rng = f"[{lo}, {hi}]"
                path = o["name"] if o["is_param"] else f"{o['name']}.{a['name']}"
                flags = "read-only" if a["read_only"] else ""
                out.append([path, a["type"], a["value"], a["unit"] or "", rng, flags])
            for act in o["actuators"]:
                params = ", ".join(f"{n}: {t}" for n, t in act["params"])
                out.append([f"{o['name']}.{act['name']}({params})", "actuator", "", "", "", ""])
        for f in self["functions"]:
            params = ", ".join(f"{n}: {t}" for n, t in f["params"])
            out.append([f"{f['name']}({params})", "function", "", "", "", ""])
        return out

    def __repr__(self) -> str:
        rows = [[str("" if c is None else c) for c in r] for r in self.rows()]
        if not rows:
            return "(no steering objects or functions)"
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    def _repr_html_(self) -> str:
        return _table(["path", "type", "value", "unit", "range", ""], self.rows())


class Processes(list):
    """What :meth:`Client.processes` returns: a list of dicts, shown as a table in Jupyter."""

    def _repr_html_(self) -> str:
        rows = [
            [p["pid"], "yes" if p["alive"] else "no", p["events"], p["lost"], " ".join(p["command_line"])]
            for p in self
        ]
        return _table(["pid", "alive", "events", "lost", "command line"], rows)


class Client:
    """A connection to one program, or to a hub (``PID@HOST:PORT`` picks a program behind
    it). Made by :func:`connect`."""

    def __init__(self, target: Union[str, int], token: Optional[str] = None) -> None:
        self._c = _gyr.Client(str(target), token)

    @property
    def target(self) -> str:
        """The target as given."""
        return self._c.target

    @property
    def hello(self) -> Dict[str, Any]:
        """The server's handshake: ``pid``, ``command_line``, ``can_steer``, ``gyr_version``,
        ``hub``."""
        return self._c.hello

    @property
    def pid(self) -> int:
        """The program's process id (the hub's, on a hub)."""
        return self._c.hello["pid"]

    def processes(self) -> Processes:
        """The programs behind the server (on a hub, every program it watches)."""
        return Processes(self._c.processes())

    def list(self) -> Listing:
        """The steering objects with their attributes and actuators, and the functions."""
        return Listing(self._c.list())

    def get(self, *paths: str) -> Any:
        """Read attributes: ``get("sim.dt")`` returns the value; several paths, or a whole
        object (``get("sim")``), return a dict by path."""
        values = self._c.get(list(paths))
        if len(paths) == 1 and len(values) == 1 and values[0][0] == paths[0]:
            return values[0][1]
        return dict(values)

    def set(self, path: Optional[str] = None, value: Any = None, /, **values: Any) -> List[Dict[str, Any]]:
        """Write attributes, all or none: ``set("sim.dt", 0.02)``, or several at once with
        keywords where ``__`` stands for the dot: ``set(sim__dt=0.02, sim__on=True)``. A
        ``str`` is parsed as the attribute's type. The program sees the values at its next
        synch point. Returns the changes (``path``, ``old``, ``new``)."""
        writes = []
        if path is not None:
            writes.append((path, value))
        writes.extend((k.replace("__", "."), v) for k, v in values.items())
        if not writes:
            raise _gyr.InvalidValueError("nothing to set: give a path and a value, or path=value keywords")
        return self._c.set(writes)

    def call(self, name: str, *args: Any, timeout: Optional[float] = None) -> Any:
        """Run an actuator (``"sim.halve"``, at the program's next synch point) or call a
        function, waiting at most ``timeout`` seconds (5 by default); returns its result."""
        return self._c.call(name, list(args), timeout)

    def status(self) -> Dict[str, Any]:
        """The run state (``state``: running, paused, ...; ``at``: the synch point it is
        paused at), synch points reached, records and losses."""
        return self._c.status()

    def pause(self) -> Dict[str, Any]:
        """Ask the program to stall at its next synch point."""
        return self._c.pause()

    def resume(self) -> Dict[str, Any]:
        """Let a paused program go on."""
        return self._c.resume()

    def step(self, n: int = 1) -> Dict[str, Any]:
        """Let the program pass ``n`` synch points, then pause again."""
        return self._c.step(n)

    def run_until(self, condition: str) -> Dict[str, Any]:
        """Let the program run until ``condition`` (``"sim.step >= 100"``) holds at a synch
        point, then pause."""
        return self._c.run_until(condition)

    def wait_paused(self, timeout: float = 10.0, poll: float = 0.02) -> Dict[str, Any]:
        """Wait until the program stalls at a synch point; returns its status. Raises
        :class:`GyrError` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.status()
            if s["state"] == "paused":
                return s
            if time.monotonic() >= deadline:
                raise _gyr.GyrError(
                    f"program {self.target} did not pause within {timeout} s (it is {s['state']}): "
                    "does it call gyr.sync_point?"
                )
            time.sleep(poll)

    def sensors(self) -> List[Dict[str, Any]]:
        """The program's sensors and their settings."""
        return self._c.sensors()

    def sensor_enable(self, name: str, on: bool = True) -> None:
        """Switch the event type ``name`` on or off in the program (``*``: every sensor)."""
        self._c.sensor_enable(name, on)

    def watch(self, paths: Union[str, Sequence[str]], interval: float = 1.0, count: Optional[int] = None) -> Iterator[Dict[str, Any]]:
        """Read ``paths`` every ``interval`` seconds, ``count`` times (for ever when None),
        yielding a dict by path each time, as ``gyr watch`` does."""
        if isinstance(paths, str):
            paths = [paths]
        if interval <= 0:
            raise _gyr.InvalidValueError(f"interval={interval}: give seconds above 0")
        n = 0
        while count is None or n < count:
            if n:
                time.sleep(interval)
            yield dict(self._c.get(list(paths)))
            n += 1

    def subscribe(self, events: Union[str, Sequence[str], None] = None, threads: Sequence[int] = ()) -> Subscription:
        """The live stream of the program's events of the types given (all when None), on a
        connection of its own: iterate it for events (dicts with ``t_ns``, ``thread``,
        ``thread_name``, ``type``, ``fields``), or call ``next(timeout)``; close it with
        ``close()`` or a ``with`` block. It holds one batch at most; when the client falls
        behind, the server drops events and ``lost`` counts them."""
        if isinstance(events, str):
            events = [events]
        return self._c.subscribe(list(events or []), list(threads))

    def __repr__(self) -> str:
        return repr(self._c)


def connect(target: Union[str, int], token: Optional[str] = None) -> Client:
    """Connect to a gyr program: ``PID`` (on this machine, as ``gyr ps`` lists them),
    ``"host:port"`` (a program's TCP listener or a hub) or ``"PID@host:port"`` (a program
    behind a hub). Over TCP the token is ``token``, else ``GYR_TOKEN``."""
    return Client(target, token)
