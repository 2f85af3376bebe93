"""Instrumenting a Python program: the runtime, sensors, spans, samples, steering objects,
functions, synch points, rules and messages.

The work is done by gyr's Rust runtime (``gyr._gyr``); this module gives it a Python shape:
keyword-declared sensor fields, spans as context managers and decorators, steering objects
whose attributes read like Python attributes, and parameters taken from a callback's
annotations.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, TypeVar, Union

from . import _gyr
from ._gyr import (
    AccessError,
    ConnectError,
    GyrError,
    InvalidValueError,
    NotFoundError,
    Rules,
    Sample,
    Sensor,
)

__all__ = [
    "AccessError",
    "ConnectError",
    "GyrError",
    "InvalidValueError",
    "NotFoundError",
    "Object",
    "Rules",
    "Sample",
    "Sensor",
    "flush",
    "function",
    "init",
    "instrument",
    "load_rules",
    "load_spec",
    "msg",
    "on_event",
    "remove_rule",
    "running",
    "sample",
    "sensor_enable",
    "shutdown",
    "span",
    "sync_point",
]

F = TypeVar("F", bound=Callable[..., Any])

_atexit_registered = False


def init(
    *,
    trace: Optional[str] = None,
    serve: Optional[bool] = None,
    listen: Optional[str] = None,
    token: Optional[str] = None,
    hub: Optional[str] = None,
    hub_token: Optional[str] = None,
    rules: Optional[str] = None,
) -> Dict[str, Any]:
    """Start gyr's runtime, configured by the ``GYR_*`` environment variables as every gyr
    program is (``GYR_TRACE``, ``GYR_LISTEN``, ``GYR_HUB``, ``GYR_RULES``, ...), and by the
    arguments given, which take precedence.

    ``trace`` writes a trace file; ``serve=False`` turns the steering server off (it serves
    ``gyr ps``/``gyr watch`` on a Unix socket by default); ``listen`` also serves on TCP (with
    ``token``, generated when None); ``hub`` pushes events to a hub at ``host:port``;
    ``rules`` runs a rules file in the program. The runtime is shut down and flushed when the
    interpreter exits, or by :func:`shutdown`. Returns where the program is served: ``pid``,
    ``socket``, and ``tcp`` with its ``token`` when it listens on TCP.
    """
    global _atexit_registered
    info = _gyr.init(
        trace=trace,
        serve=serve,
        listen=listen,
        token=token,
        hub=hub,
        hub_token=hub_token,
        rules=rules,
    )
    if not _atexit_registered:
        atexit.register(_gyr._at_exit)
        _atexit_registered = True
    return info


shutdown = _gyr.shutdown
flush = _gyr.flush
running = _gyr.running
sensor_enable = _gyr.sensor_enable
load_spec = _gyr.load_spec
remove_rule = _gyr.remove_rule
load_rules = _gyr.load_rules


def sample(name: str, initial: Union[int, float] = 0.0) -> Sample:
    """A sampling sensor: the program stores values (``s.set(x)``), a local monitor records
    the latest at the sensor's interval. An ``int`` initial value makes an integer cell."""
    return Sample(name, initial)


class span:
    """A span: ``gyr.span.begin`` when it starts, ``gyr.span.end`` when it ends, as Rust's
    ``gyr::span!``. Use it as a context manager or a decorator::

        with gyr.span("solve"):
            ...

        @gyr.span("assemble")
        def assemble(): ...
    """

    __slots__ = ("_name", "_local")

    def __init__(self, name: str) -> None:
        _gyr.Span(name)  # checks and keeps the name once
        self._name = name
        self._local = threading.local()

    @property
    def name(self) -> str:
        return self._name

    def __enter__(self) -> "span":
        s = _gyr.Span(self._name)
        s.__enter__()
        stack = getattr(self._local, "open", None)
        if stack is None:
            stack = self._local.open = []
        stack.append(s)
        return self

    def __exit__(self, *exc: Any) -> bool:
        stack = getattr(self._local, "open", None)
        if stack:
            stack.pop().__exit__(None, None, None)
        return False

    def __call__(self, fn: F) -> F:
        name = self._name

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _gyr.Span(name):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"span({self._name!r})"


def instrument(fn: F) -> F:
    """A span around every call of ``fn``, named by its qualified name (as Rust's
    ``#[gyr::instrument]``)."""
    return span(fn.__qualname__)(fn)


_TYPE_NAMES = {float: "float", int: "int", bool: "bool", str: "str"}


def _params(fn: Callable[..., Any], params: Any) -> List[Tuple[str, str]]:
    """Parameters as (name, type) pairs: as given (a list of pairs, a dict, or
    ``"n: int, x: float"``), else from the callback's annotations (float when none)."""
    if params is None:
        out = []
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            ann = p.annotation
            if isinstance(ann, str):
                ty = ann
            else:
                ty = _TYPE_NAMES.get(ann, "float")
            out.append((p.name, ty))
        return out
    if isinstance(params, str):
        out = []
        for part in params.split(","):
            if not part.strip():
                continue
            name, sep, ty = part.partition(":")
            if not sep:
                raise InvalidValueError(
                    f"parameter `{part.strip()}` has no type: write `name: float`, `name: int` or `name: bool`"
                )
            out.append((name.strip(), ty.strip()))
        return out
    if isinstance(params, dict):
        return [(str(k), str(v)) for k, v in params.items()]
    return [(str(k), str(v)) for k, v in params]


class Object:
    """A steering object: its attributes are values of the program that clients (``gyr
    set``, ``gyr.connect(...).set``, rules) read and set. A value set from outside reaches the
    program at its next :func:`sync_point`, on the thread that calls it, never in between::

        sim = gyr.Object("sim", "the heat solver")
        sim.attribute("dt", 0.01, unit="s", min=1e-6, max=0.1)
        sim.attribute("step", 0, read_only=True)
        while ...:
            gyr.sync_point("step")
            sim.step += 1
            advance(sim.dt)

    Reading ``sim.dt`` gives the program's value; assigning ``sim.step = 3`` changes it (clients
    see it after the next synch point).
    """

    __slots__ = ("_obj",)

    def __init__(self, name: str, description: Optional[str] = None) -> None:
        object.__setattr__(self, "_obj", _gyr.Object(name, description))

    @property
    def name(self) -> str:
        return self._obj.name

    def attribute(
        self,
        name: str,
        value: Any,
        *,
        type: Optional[str] = None,
        unit: Optional[str] = None,
        min: Optional[float] = None,
        max: Optional[float] = None,
        read_only: bool = False,
        description: Optional[str] = None,
    ) -> "Object":
        """Add the attribute ``name`` holding ``value`` (its type is the value's unless
        ``type`` says: ``float``, ``int``, ``uint``, ``bool``, ``str``), with a unit, a range and
        a description; clients may only read a ``read_only`` one. Returns the object."""
        self._obj.attribute(
            name,
            value,
            type=type,
            unit=unit,
            min=min,
            max=max,
            read_only=read_only,
            description=description,
        )
        return self

    def actuator(
        self,
        name: Union[str, Callable[..., Any], None] = None,
        callback: Optional[Callable[..., Any]] = None,
        *,
        params: Any = None,
        description: Optional[str] = None,
    ) -> Any:
        """Add an actuator: ``callback(*args)`` runs at the program's next synch point after a
        client asks (``gyr call PID sim.halve 2``), on the thread that reaches it. Its
        parameters come from ``params`` or from its annotations (``def halve(by: float)``).
        Its return value goes to the client; an exception it raises is reported to the client
        and on standard error, and the program goes on. Also a decorator::

            @sim.actuator
            def reset(): ...
        """
        if callable(name):
            callback, name = name, None
        if callback is None:
            return lambda fn: self.actuator(name, fn, params=params, description=description)
        self._obj.actuator(
            name or callback.__name__,
            callback,
            _params(callback, params),
            description if description is not None else inspect.getdoc(callback),
        )
        return callback

    def sync(self) -> None:
        """Exchange this object's values with its attributes without a synch point."""
        self._obj.sync()

    def attributes(self) -> Dict[str, Any]:
        """The program's values by attribute name."""
        return {n: self._obj.get(n) for n in self._obj.attributes()}

    def __getattr__(self, name: str) -> Any:
        try:
            return self._obj.get(name)
        except NotFoundError as e:
            raise AttributeError(str(e)) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._obj.set(name, value)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.attributes().items())
        return f"Object({self.name!r}, {fields})"


def function(
    name: Union[str, Callable[..., Any], None] = None,
    callback: Optional[Callable[..., Any]] = None,
    *,
    params: Any = None,
    description: Optional[str] = None,
) -> Any:
    """Register a function that clients call (``gyr call PID name ARGS``) and rules
    actuate: it runs when called, on gyr's steering server thread (holding the GIL for the
    call), so it must be safe to run beside the program's own threads. Parameters as for
    :meth:`Object.actuator`. Also a decorator: ``@gyr.function`` or ``@gyr.function("name")``.
    """
    if callable(name):
        callback, name = name, None
    if callback is None:
        return lambda fn: function(name, fn, params=params, description=description)
    _gyr.function(
        name or callback.__name__,
        callback,
        _params(callback, params),
        description if description is not None else inspect.getdoc(callback),
    )
    return callback


def sync_point(name: str = "main") -> None:
    """A synch point: queued actuators run here, a paused program waits here (other Python
    threads go on), and every :class:`Object`'s values are exchanged with its attributes.

    A signal while paused (Ctrl-C, a notebook's interrupt) resumes the program and raises here,
    as in any blocking call."""
    _gyr.sync_point(name)


def on_event(
    name: str,
    event_type: str,
    then: Callable[[Dict[str, Any]], Any],
    when: Optional[Callable[[Dict[str, Any]], Any]] = None,
) -> None:
    """Add the rule ``name``: when an event of type ``event_type`` is recorded and
    ``when(fields)`` is true (always, when None), ``then(fields)`` runs on gyr's steering
    thread with the event's fields as a dict. An exception counts as the rule's failure and
    is printed; the program goes on. :func:`remove_rule` takes it out."""
    _gyr.on_event(name, event_type, then, when)


class _Msg:
    """Messages between processes, for clock correction across them (``gyr trace clock``):
    call :meth:`init` once, :meth:`send` just before a message leaves, :meth:`recv` just after
    one arrived."""

    @staticmethod
    def init(job: str, rank: int, size: int) -> None:
        """This process is rank ``rank`` of ``size`` in job ``job``."""
        _gyr.msg_init(job, rank, size)

    @staticmethod
    def send(peer: int, tag: int, nbytes: int, comm: int = 0) -> None:
        """A message of ``nbytes`` bytes to rank ``peer`` begins to leave."""
        _gyr.msg_send(peer, tag, nbytes, comm)

    @staticmethod
    def recv(peer: int, tag: int, nbytes: int, comm: int = 0) -> None:
        """A message of ``nbytes`` bytes from rank ``peer`` has arrived."""
        _gyr.msg_recv(peer, tag, nbytes, comm)


msg = _Msg()
