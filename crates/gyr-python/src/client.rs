//! The client of gyr's API for Python: connect to a program (`PID`, `host:port`, `PID@HUB`),
//! list, get, set, call, pause, step, resume, read its status and subscribe to its events.
//!
//! It is gyr-client's `Client` (targets, discovery, tokens, the client's name on every
//! request) behind blocking calls, like gyr-client's `Session`, but keeping each refusal's
//! gRPC status code so that it becomes the matching exception (`NotFoundError`,
//! `InvalidValueError`, `AccessError`, `ConnectError`). Every call releases the GIL while it
//! waits; a subscription waits in short slices and checks for signals between them, so Ctrl-C
//! stops it.

use crate::GyrError;
use crate::errors::{AccessError, ConnectError, InvalidValueError, NotFoundError};
use crate::value::{from_py, to_py};
use gyr_client::events::EventDecoder;
use gyr_client::{Client as Inner, ClientError, Target};
use gyr_proto::v1::gyr_client::GyrClient;
use gyr_proto::{PROTOCOL_VERSION, v1};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// How long a subscription waits for the next batch before it looks for signals (Ctrl-C).
pub(crate) const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// How long a call waits for the program's next synch point by default.
pub(crate) const DEFAULT_CALL_TIMEOUT_MS: u32 = 5000;

/// The name the server's steering log shows for this client.
const CLIENT_NAME: &str = "python";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A connection: its runtime and client.
struct Conn {
    rt: tokio::runtime::Runtime,
    client: Inner,
    target: String,
}

/// A failure to connect as the exception for it.
fn client_error(e: ClientError) -> PyErr {
    let msg = e.to_string();
    match e {
        ClientError::BadTarget(_) | ClientError::BadPid { .. } => InvalidValueError::new_err(msg),
        ClientError::Refused(_) => GyrError::new_err(msg),
        _ => ConnectError::new_err(msg),
    }
}

/// A server's refusal as the exception for it, by its status code.
fn status_error(target: &str, s: tonic::Status) -> PyErr {
    use tonic::Code;
    let code = s.code();
    let e = ClientError::from_status(target, s);
    let msg = e.to_string();
    if matches!(e, ClientError::Gone { .. }) {
        return ConnectError::new_err(msg);
    }
    match code {
        Code::NotFound => NotFoundError::new_err(msg),
        Code::InvalidArgument | Code::OutOfRange => InvalidValueError::new_err(msg),
        Code::Unauthenticated | Code::PermissionDenied => AccessError::new_err(msg),
        Code::Unavailable => ConnectError::new_err(msg),
        _ => GyrError::new_err(msg),
    }
}

impl Conn {
    fn open(target: &str, token: Option<String>) -> PyResult<(Conn, v1::HandshakeReply)> {
        let parsed: Target = target.parse().map_err(client_error)?;
        if token.as_deref() == Some("") {
            return Err(InvalidValueError::new_err(
                "token is empty: pass the program's or hub's token, or None",
            ));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| GyrError::new_err(format!("cannot start the async runtime: {e}")))?;
        let client = rt
            .block_on(Inner::connect(&parsed, token, CLIENT_NAME))
            .map_err(client_error)?;
        let conn = Conn {
            rt,
            client,
            target: target.to_owned(),
        };
        let hello = conn.run(
            v1::HandshakeRequest {
                protocol_version: PROTOCOL_VERSION,
                client: CLIENT_NAME.to_owned(),
            },
            |mut c, r| async move { c.handshake(r).await },
        )?;
        Ok((conn, hello))
    }

    /// Runs one request: `f(client, request)`, the request carrying the client's name, token
    /// and program.
    fn run<T, R, F, Fut>(&self, msg: T, f: F) -> PyResult<R>
    where
        F: FnOnce(GyrClient<Channel>, tonic::Request<T>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        self.rt
            .block_on(f(self.client.inner.clone(), self.client.req(msg)))
            .map(tonic::Response::into_inner)
            .map_err(|s| status_error(&self.target, s))
    }
}

/// A connection to one program (or a hub), from `gyr.connect`.
#[pyclass(module = "gyr._gyr", frozen)]
struct Client {
    conn: Mutex<Conn>,
    target: String,
    token: Option<String>,
    hello: v1::HandshakeReply,
}

fn value_of(v: Option<v1::Value>) -> Option<gyr_core::Value> {
    v.and_then(|v| v.to_core())
}

fn py_value<'py>(py: Python<'py>, v: Option<v1::Value>) -> PyResult<Bound<'py, PyAny>> {
    match (value_of(v.clone()), v.and_then(|v| v.kind)) {
        (Some(v), _) => to_py(py, &v),
        (None, Some(v1::value::Kind::Text(t))) => Ok(t.into_pyobject(py)?.into_any()),
        _ => Ok(py.None().into_bound(py)),
    }
}

/// A Python value as a wire value: a `str` goes as text, which the program parses as the
/// attribute's or parameter's type (so `"0.5"` sets a float).
fn wire(v: &Bound<'_, PyAny>, what: &str) -> PyResult<v1::Value> {
    Ok(match from_py(v, what)? {
        gyr_core::Value::Str(s) => v1::Value::text(s),
        other => v1::Value::from(other),
    })
}

fn status_dict<'py>(py: Python<'py>, s: v1::StatusReply) -> PyResult<Bound<'py, PyDict>> {
    use v1::run_state::Kind;
    let d = PyDict::new(py);
    let state = s.state.unwrap_or_default();
    let kind = match Kind::try_from(state.kind).unwrap_or(Kind::Unspecified) {
        Kind::Running => "running",
        Kind::PauseRequested => "pause requested",
        Kind::Paused => "paused",
        Kind::Stepping => "stepping",
        Kind::RunningUntil => "running until",
        Kind::Unspecified => "unknown",
    };
    d.set_item("state", kind)?;
    d.set_item("at", (!state.at.is_empty()).then_some(state.at))?;
    d.set_item("count", state.count)?;
    d.set_item("pid", s.pid)?;
    d.set_item("command_line", s.command_line)?;
    d.set_item(
        "synch_points",
        s.synch_points.into_iter().collect::<Vec<_>>(),
    )?;
    d.set_item("records", s.records)?;
    d.set_item("lost", s.lost)?;
    Ok(d)
}

fn operation<'py>(py: Python<'py>, o: v1::OperationInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", o.name)?;
    let params: Vec<(String, &str)> = o
        .params
        .into_iter()
        .map(|p| (p.name, v1::AttrType::user_name(p.r#type)))
        .collect();
    d.set_item("params", params)?;
    d.set_item("description", o.description)?;
    Ok(d)
}

impl Client {
    fn conn(&self) -> MutexGuard<'_, Conn> {
        lock(&self.conn)
    }

    fn control<'py>(
        &self,
        py: Python<'py>,
        req: v1::ControlRequest,
    ) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| {
            self.conn()
                .run(req, |mut c, r| async move { c.control(r).await })
        })?;
        status_dict(py, s)
    }
}

#[pymethods]
impl Client {
    /// Connects to `target` (a pid, `host:port`, or `PID@HOST:PORT` behind a hub) and shakes
    /// hands, which checks the protocol version and the token (over TCP, `GYR_TOKEN` when none
    /// is given).
    #[new]
    #[pyo3(signature = (target, token=None))]
    fn new(py: Python<'_>, target: String, token: Option<String>) -> PyResult<Client> {
        let t = target.clone();
        let tok = token.clone();
        let (conn, hello) = py.detach(move || Conn::open(&t, tok))?;
        Ok(Client {
            conn: Mutex::new(conn),
            target,
            token,
            hello,
        })
    }

    /// The target as given.
    #[getter]
    fn target(&self) -> &str {
        &self.target
    }

    /// The server's handshake: `pid`, `command_line`, `can_steer`, `gyr_version`, `hub`.
    #[getter]
    fn hello<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let h = &self.hello;
        let d = PyDict::new(py);
        d.set_item("pid", h.pid)?;
        d.set_item("command_line", h.command_line.clone())?;
        d.set_item("can_steer", h.can_steer)?;
        d.set_item("gyr_version", h.gyr_version.clone())?;
        d.set_item("hub", h.hub)?;
        Ok(d)
    }

    /// The programs behind the server (on a hub, every program it watches): dicts with `pid`,
    /// `command_line`, `alive`, `started_unix_ns`, `events`, `lost`, `source`.
    fn processes<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let r = py.detach(|| {
            self.conn()
                .run(v1::ListProcessesRequest {}, |mut c, r| async move {
                    c.list_processes(r).await
                })
        })?;
        r.processes
            .into_iter()
            .map(|p| {
                let d = PyDict::new(py);
                d.set_item("pid", p.pid)?;
                d.set_item("command_line", p.command_line)?;
                d.set_item("alive", p.alive)?;
                d.set_item("started_unix_ns", p.started_unix_ns)?;
                d.set_item("events", p.events)?;
                d.set_item("lost", p.lost)?;
                d.set_item("source", p.source)?;
                Ok(d)
            })
            .collect()
    }

    /// The steering objects and functions: a dict with `objects` (each with `name`,
    /// `description`, `is_param`, `version`, `attributes`, `actuators`) and `functions`.
    fn list<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = py.detach(|| {
            self.conn()
                .run(v1::ListObjectsRequest {}, |mut c, r| async move {
                    c.list_objects(r).await
                })
        })?;
        let objects = PyList::empty(py);
        for o in r.objects {
            let d = PyDict::new(py);
            d.set_item("name", o.name)?;
            d.set_item("description", o.description)?;
            d.set_item("is_param", o.is_param)?;
            d.set_item("version", o.version)?;
            let attrs = PyList::empty(py);
            for a in o.attributes {
                let ad = PyDict::new(py);
                ad.set_item("name", a.name)?;
                ad.set_item("type", v1::AttrType::user_name(a.r#type))?;
                ad.set_item("unit", (!a.unit.is_empty()).then_some(a.unit))?;
                ad.set_item("min", a.has_min.then_some(a.min))?;
                ad.set_item("max", a.has_max.then_some(a.max))?;
                ad.set_item("read_only", a.read_only)?;
                ad.set_item("description", a.description)?;
                ad.set_item("value", py_value(py, a.value)?)?;
                attrs.append(ad)?;
            }
            d.set_item("attributes", attrs)?;
            let acts = o
                .actuators
                .into_iter()
                .map(|a| operation(py, a))
                .collect::<PyResult<Vec<_>>>()?;
            d.set_item("actuators", acts)?;
            objects.append(d)?;
        }
        let functions = r
            .functions
            .into_iter()
            .map(|f| operation(py, f))
            .collect::<PyResult<Vec<_>>>()?;
        let out = PyDict::new(py);
        out.set_item("objects", objects)?;
        out.set_item("functions", functions)?;
        Ok(out)
    }

    /// Reads attributes (`object.attribute`, or `object` for all of its): (path, value) pairs.
    fn get<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<String>,
    ) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
        let r = py.detach(|| {
            self.conn()
                .run(v1::GetRequest { paths }, |mut c, r| async move {
                    c.get(r).await
                })
        })?;
        r.values
            .into_iter()
            .map(|pv| Ok((pv.path, py_value(py, pv.value)?)))
            .collect()
    }

    /// Writes attributes, all or none: (path, value) pairs; a `str` is parsed as the
    /// attribute's type. Returns the changes: dicts with `path`, `old`, `new`.
    fn set<'py>(
        &self,
        py: Python<'py>,
        writes: Vec<(String, Bound<'py, PyAny>)>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let writes = writes
            .iter()
            .map(|(p, v)| {
                Ok(v1::PathValue {
                    path: p.clone(),
                    value: Some(wire(v, p)?),
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let r = py.detach(|| {
            self.conn()
                .run(v1::SetRequest { writes }, |mut c, r| async move {
                    c.set(r).await
                })
        })?;
        r.changes
            .into_iter()
            .map(|ch| {
                let d = PyDict::new(py);
                d.set_item("path", ch.path)?;
                d.set_item("old", py_value(py, ch.old)?)?;
                d.set_item("new", py_value(py, ch.new)?)?;
                Ok(d)
            })
            .collect()
    }

    /// Runs an actuator (`object.actuator`, at the program's next synch point) or calls a
    /// function, waiting at most `timeout` seconds; returns its result.
    #[pyo3(signature = (target, args, timeout=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        target: String,
        args: Vec<Bound<'py, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = args
            .iter()
            .map(|a| wire(a, &target))
            .collect::<PyResult<Vec<_>>>()?;
        let timeout_ms = match timeout {
            None => DEFAULT_CALL_TIMEOUT_MS,
            Some(t) if t > 0.0 && t <= 3600.0 => (t * 1000.0).ceil() as u32,
            Some(t) => {
                return Err(InvalidValueError::new_err(format!(
                    "timeout={t}: give seconds above 0, at most 3600"
                )));
            }
        };
        let r = py.detach(|| {
            self.conn().run(
                v1::CallRequest {
                    target,
                    args,
                    timeout_ms,
                },
                |mut c, r| async move { c.call(r).await },
            )
        })?;
        py_value(py, r.result)
    }

    /// The program's run state, synch points reached, records and losses.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| {
            self.conn().run(
                v1::StatusRequest {},
                |mut c, r| async move { c.status(r).await },
            )
        })?;
        status_dict(py, s)
    }

    /// Asks the program to stall at its next synch point.
    fn pause<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.control(
            py,
            v1::ControlRequest {
                action: v1::control_request::Action::Pause as i32,
                ..Default::default()
            },
        )
    }

    /// Lets a paused program go on.
    fn resume<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.control(
            py,
            v1::ControlRequest {
                action: v1::control_request::Action::Resume as i32,
                ..Default::default()
            },
        )
    }

    /// Lets the program pass `n` synch points, then pause again.
    #[pyo3(signature = (n=1))]
    fn step<'py>(&self, py: Python<'py>, n: u64) -> PyResult<Bound<'py, PyDict>> {
        if n == 0 {
            return Err(InvalidValueError::new_err(
                "step(0) does nothing: give 1 or more synch points",
            ));
        }
        self.control(
            py,
            v1::ControlRequest {
                action: v1::control_request::Action::Step as i32,
                steps: n,
                ..Default::default()
            },
        )
    }

    /// Lets the program run until `condition` (`"sim.step >= 100"`) holds at a synch point.
    fn run_until<'py>(&self, py: Python<'py>, condition: String) -> PyResult<Bound<'py, PyDict>> {
        self.control(
            py,
            v1::ControlRequest {
                action: v1::control_request::Action::RunUntil as i32,
                until: condition,
                ..Default::default()
            },
        )
    }

    /// The program's sensors: dicts with `type`, `instance`, `kind`, `active`, `enabled`,
    /// `rate`, `skipped`.
    fn sensors<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let r = py.detach(|| {
            self.conn()
                .run(v1::ListSensorsRequest {}, |mut c, r| async move {
                    c.list_sensors(r).await
                })
        })?;
        r.sensors
            .into_iter()
            .map(|s| {
                let d = PyDict::new(py);
                d.set_item("type", s.type_name)?;
                d.set_item("instance", s.instance)?;
                d.set_item("kind", s.kind)?;
                d.set_item("active", s.active)?;
                d.set_item("enabled", s.enabled)?;
                d.set_item("rate", s.rate)?;
                d.set_item("skipped", s.skipped)?;
                Ok(d)
            })
            .collect()
    }

    /// Switches the event type `name` on or off in the program (`*`: every sensor).
    fn sensor_enable(&self, py: Python<'_>, name: String, on: bool) -> PyResult<()> {
        use v1::sensor_control_request::Scope;
        let scope = if name == "*" {
            Scope::Global
        } else {
            Scope::Type
        };
        py.detach(|| {
            self.conn().run(
                v1::SensorControlRequest {
                    scope: scope as i32,
                    name,
                    enabled: Some(on),
                    ..Default::default()
                },
                |mut c, r| async move { c.sensor_control(r).await },
            )
        })
        .map(drop)
    }

    /// Opens the live event stream of the types given (all when empty), on a connection of
    /// its own.
    #[pyo3(signature = (types=Vec::new(), threads=Vec::new()))]
    fn subscribe(
        &self,
        py: Python<'_>,
        types: Vec<String>,
        threads: Vec<u64>,
    ) -> PyResult<Subscription> {
        let target = self.target.clone();
        let token = self.token.clone();
        py.detach(move || {
            let (conn, _) = Conn::open(&target, token)?;
            let stream = conn.run(
                v1::SubscribeRequest {
                    types,
                    threads,
                    decoded: false,
                },
                |mut c, r| async move { c.subscribe(r).await },
            )?;
            Ok(Subscription {
                inner: Mutex::new(Some(Stream {
                    conn,
                    stream,
                    decoder: EventDecoder::default(),
                    pending: VecDeque::new(),
                    lost: 0,
                })),
            })
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "Client({:?}, pid={}, {})",
            self.target,
            self.hello.pid,
            if self.hello.can_steer {
                "steer"
            } else {
                "watch only"
            }
        )
    }
}

/// An open subscription's state.
struct Stream {
    conn: Conn,
    stream: tonic::Streaming<v1::EventBatch>,
    decoder: EventDecoder,
    /// The events of the last batch not handed out yet: at most one batch.
    pending: VecDeque<gyr_client::events::Event>,
    lost: u64,
}

/// The live event stream, from `Client.subscribe`: iterate it for events (dicts with `t_ns`,
/// `thread`, `thread_name`, `type`, `fields`), or call `next(timeout)`; `close()` ends it.
#[pyclass(module = "gyr._gyr", frozen)]
struct Subscription {
    inner: Mutex<Option<Stream>>,
}

enum Next {
    Event(gyr_client::events::Event),
    TimedOut,
    Ended,
}

impl Subscription {
    /// Waits for the next event for at most `timeout` (None: until one comes or a signal).
    fn wait(&self, py: Python<'_>, timeout: Option<Duration>) -> PyResult<Next> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let step = py.detach(|| -> PyResult<Option<Next>> {
                let mut g = lock(&self.inner);
                let Some(s) = g.as_mut() else {
                    return Ok(Some(Next::Ended));
                };
                if let Some(e) = s.pending.pop_front() {
                    return Ok(Some(Next::Event(e)));
                }
                let slice = match deadline {
                    Some(d) => d
                        .saturating_duration_since(Instant::now())
                        .min(SIGNAL_CHECK),
                    None => SIGNAL_CHECK,
                };
                let got = s
                    .conn
                    .rt
                    .block_on(async { tokio::time::timeout(slice, s.stream.message()).await });
                match got {
                    Err(_elapsed) => {
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            return Ok(Some(Next::TimedOut));
                        }
                        Ok(None)
                    }
                    Ok(Ok(Some(batch))) => {
                        let b = s.decoder.batch(batch);
                        s.lost += b.lost;
                        s.pending.extend(b.events);
                        Ok(None)
                    }
                    Ok(Ok(None)) => {
                        *g = None;
                        Ok(Some(Next::Ended))
                    }
                    Ok(Err(st)) => {
                        let e = status_error(&s.conn.target, st);
                        *g = None;
                        Err(e)
                    }
                }
            })?;
            if let Some(n) = step {
                return Ok(n);
            }
            py.check_signals()?;
        }
    }
}

fn event_dict<'py>(py: Python<'py>, e: gyr_client::events::Event) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("t_ns", e.t_ns)?;
    d.set_item("thread", e.thread)?;
    d.set_item("thread_name", e.thread_name)?;
    d.set_item("type", e.type_name)?;
    let fields = PyDict::new(py);
    for (k, v) in &e.fields {
        fields.set_item(k, to_py(py, v)?)?;
    }
    d.set_item("fields", fields)?;
    Ok(d)
}

#[pymethods]
impl Subscription {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        match self.wait(py, None)? {
            Next::Event(e) => event_dict(py, e).map(Some),
            _ => Ok(None),
        }
    }

    /// The next event, waiting at most `timeout` seconds (None: as long as it takes); None when
    /// the time ran out or the stream ended.
    #[pyo3(signature = (timeout=None))]
    fn next<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let timeout = match timeout {
            Some(t) if t.is_finite() && t >= 0.0 => Some(Duration::from_secs_f64(t.min(1e6))),
            Some(t) => {
                return Err(InvalidValueError::new_err(format!(
                    "timeout={t}: give seconds, 0 or more"
                )));
            }
            None => None,
        };
        match self.wait(py, timeout)? {
            Next::Event(e) => event_dict(py, e).map(Some),
            _ => Ok(None),
        }
    }

    /// Events the server did not send because this client fell behind.
    #[getter]
    fn lost(&self) -> u64 {
        lock(&self.inner).as_ref().map_or(0, |s| s.lost)
    }

    /// Whether the stream is closed.
    #[getter]
    fn closed(&self) -> bool {
        lock(&self.inner).is_none()
    }

    /// Ends the stream.
    fn close(&self) {
        lock(&self.inner).take();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }
}

/// Adds the client's classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Client>()?;
    m.add_class::<Subscription>()?;
    Ok(())
}
