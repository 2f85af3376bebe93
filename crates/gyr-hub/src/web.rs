//! The web UI's server: the page and its assets (embedded in the binary), and one WebSocket per
//! browser. A page gets a snapshot when it connects, then an update every tick; what it sends
//! (set, call, control, sensor control) is forwarded to the program, and the reply comes back to
//! that page only. Every page sees every change, because changes reach them through the
//! programs' state, not through the page that made them.
//!
//! Every request must name the hub by one of its addresses (`Host`) and, when a browser sends
//! it, come from a page of the hub (`Origin`): otherwise any web site its user visits could
//! steer through a hub without a token, directly or by DNS rebinding.

use crate::Shared;
use crate::protocol::{AccessInfo, PageRequest, Reply, ToPage};
use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use gyr_client::command::{self, Command, SensorScope, SensorSetting, SteerCommand};
use gyr_proto::listen::{Authenticated, GuardedListener, GuardedStream};
use gyr_proto::v1;
use rust_embed::RustEmbed;
use serde_json::Value as Json;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::broadcast::error::RecvError;

/// The page: `web/src` (its type declarations are for checking it, not for browsers).
#[derive(RustEmbed)]
#[folder = "../../web/src/"]
#[exclude = "*.d.ts"]
struct Page;

/// uPlot: the files of the npm package `web/package-lock.json` names, checked in under
/// `web/vendor` so that building gyr needs no Node.js (`scripts/vendor-web` refreshes them,
/// and a test checks they are the locked package's).
#[derive(RustEmbed)]
#[folder = "../../web/vendor/"]
#[include = "uPlot.iife.min.js"]
#[include = "uPlot.min.css"]
struct Vendor;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(|| async { asset::<Page>("index.html") }))
        .route(
            "/vendor/{file}",
            get(|Path(f): Path<String>| async move { asset::<Vendor>(&f) }),
        )
        .route("/api/access", get(access))
        .route("/api/state", get(state))
        .route("/api/timeline", get(timeline))
        .route("/api/mpi", get(mpi))
        .route("/api/mpi/timeline", get(mpi_timeline))
        .route("/ws", get(ws))
        .route("/metrics", get(metrics))
        .route(
            "/{*path}",
            get(|Path(f): Path<String>| async move { page_asset(&f) }),
        )
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            same_site,
        ))
        .with_state(shared)
}

/// The names the web UI may be reached by, as `host[:port]` in lower case: its own address,
/// `localhost` and the loopback addresses when it listens on loopback, and the names given
/// with `--allow-host` (without a port: any port).
#[derive(Debug)]
pub(crate) struct AllowedHosts {
    exact: Vec<String>,
    any_port: Vec<String>,
}

impl AllowedHosts {
    pub(crate) fn new(addr: SocketAddr, extra: &[String]) -> Self {
        let port = addr.port();
        let mut exact = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                exact.push(format!("{name}:{port}"));
            }
        }
        let mut any_port = Vec::new();
        for h in extra {
            let h = h.trim().to_ascii_lowercase();
            match split_port(&h) {
                (_, Some(_)) => exact.push(h),
                (name, None) => any_port.push(name.to_owned()),
            }
        }
        AllowedHosts { exact, any_port }
    }

    /// Whether `host` (a `Host` header's value, or an origin's host and port) is allowed.
    fn allows(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        let (name, _) = split_port(&host);
        self.exact.contains(&host) || self.any_port.iter().any(|n| n == name)
    }
}

/// `host:port` → (`host`, `Some(port)`); `[v6]:port` alike; a name alone → (`name`, `None`).
fn split_port(h: &str) -> (&str, Option<&str>) {
    match h.rsplit_once(':') {
        Some((name, port))
            if !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && (!name.contains(':') || name.ends_with(']')) =>
        {
            (name, Some(port))
        }
        _ => (h, None),
    }
}

/// Refuses requests naming another host (a DNS-rebinding page) or sent by a page of another
/// site (any page may open a WebSocket or send a request to a local port): a browser sets
/// both headers and a page cannot forge them. Requests without them (curl, the CLI) pass.
/// A request that passes lets its connection stay open (see [`gyr_proto::listen`]).
async fn same_site(
    State(shared): State<Arc<Shared>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let text = |v: &header::HeaderValue| v.to_str().unwrap_or("?").to_owned();
    let host = req
        .headers()
        .get(header::HOST)
        .map(text)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    if let Some(h) = host
        && !shared.hosts.allows(&h)
    {
        let (name, _) = split_port(&h);
        return forbidden(format!(
            "refused: `{h}` is not this hub's address; if you reach the hub by this name (an SSH tunnel, a proxy), start it with --allow-host {h} (or --allow-host {name} for any port)"
        ));
    }
    if let Some(o) = req.headers().get(header::ORIGIN).map(text) {
        let site = o
            .strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
            .filter(|h| !h.is_empty() && !h.contains('/'));
        if !site.is_some_and(|h| shared.hosts.allows(h)) {
            let name = site.unwrap_or("NAME");
            return forbidden(format!(
                "refused: a page from `{o}` may not use this hub; if that is this hub's page reached by another name, start the hub with --allow-host {name}"
            ));
        }
    }
    if let Some(ConnectInfo(c)) = req.extensions().get::<ConnectInfo<Connection>>() {
        c.0.mark();
    }
    next.run(req).await
}

fn forbidden(msg: String) -> Response {
    (StatusCode::FORBIDDEN, msg).into_response()
}

/// The web UI's TCP listener, within [`gyr_proto::listen::Limits`].
#[derive(Debug)]
pub(crate) struct Listener(pub(crate) GuardedListener);

impl axum::serve::Listener for Listener {
    type Io = GuardedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (GuardedStream, SocketAddr) {
        loop {
            match self.0.accept().await {
                Ok(c) => return c,
                // Out of descriptors, most likely: wait for some to be freed, as axum does.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// What each request knows of its connection: the mark that lets it stay open.
#[derive(Debug, Clone)]
pub(crate) struct Connection(Authenticated);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, Listener>>
    for Connection
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, Listener>) -> Self {
        Connection(stream.io().authenticated())
    }
}

/// A file of the page, by its path under `web/src` (`app.js`, `panels/charts.js`): only plain
/// relative paths of embedded files are served, never one naming a parent or the root.
fn page_asset(path: &str) -> Response {
    let plain = path
        .split('/')
        .all(|seg| !seg.is_empty() && seg != "." && seg != ".." && !seg.contains('\\'));
    if !plain {
        return (StatusCode::NOT_FOUND, format!("no such file: {path}")).into_response();
    }
    asset::<Page>(path)
}

fn asset<E: RustEmbed>(path: &str) -> Response {
    match E::get(path) {
        Some(f) => (
            [
                (
                    header::CONTENT_TYPE,
                    content_type(path, f.metadata.mimetype()),
                ),
                (header::CACHE_CONTROL, "no-cache".to_owned()),
            ],
            f.data,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, format!("no such file: {path}")).into_response(),
    }
}

/// The page's modules are loaded by `<script type="module">`, which browsers run only when
/// served with a JavaScript type: it is said here rather than left to a guess by extension.
fn content_type(path: &str, guessed: &str) -> String {
    if path.ends_with(".js") || path.ends_with(".mjs") {
        "text/javascript; charset=utf-8".to_owned()
    } else {
        guessed.to_owned()
    }
}

/// The `token` query parameter pages pass (WebSockets cannot carry headers from a browser).
#[derive(Debug, serde::Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

fn refuse(shared: &Shared, token: Option<&str>) -> Response {
    let msg = if token.is_some() {
        "the token is not valid for this hub"
    } else if shared.access.guarded() {
        "this hub needs a token"
    } else {
        "refused"
    };
    (StatusCode::UNAUTHORIZED, msg.to_owned()).into_response()
}

/// Whether the hub asks for a token, and what the given one allows: the page asks first.
async fn access(State(shared): State<Arc<Shared>>, Query(q): Query<TokenQuery>) -> Response {
    let allowed = shared.access.check(q.token.as_deref());
    let j = AccessInfo {
        guarded: shared.access.guarded(),
        ok: allowed.is_some(),
        steer: allowed == Some(true),
        replay: shared.replay.is_some(),
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(&j).expect("page messages always serialize"),
    )
        .into_response()
}

async fn state(State(shared): State<Arc<Shared>>, Query(q): Query<TokenQuery>) -> Response {
    if shared.access.check(q.token.as_deref()).is_none() {
        return refuse(&shared, q.token.as_deref());
    }
    let snap = snapshot(&shared);
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(&snap).expect("page messages always serialize"),
    )
        .into_response()
}

/// `/api/timeline`'s query: the program, the rows, the time range in seconds and the width.
#[derive(Debug, serde::Deserialize)]
struct TimelineQuery {
    token: Option<String>,
    pid: u32,
    #[serde(default)]
    r0: usize,
    #[serde(default = "default_rows")]
    r1: usize,
    #[serde(default)]
    t0: f64,
    t1: Option<f64>,
    /// Instead of `t0` and `t1`: the last `span` seconds up to the latest event, so a view that
    /// follows the live end keeps its width whatever the time between two tiles.
    span: Option<f64>,
    #[serde(default = "default_width")]
    w: usize,
    #[serde(default = "default_arrows")]
    arrows: usize,
}

impl TimelineQuery {
    /// The viewport's start, in seconds, given its end `t1`: `t0`, or `span` before `t1`.
    fn start(&self, t1: f64) -> f64 {
        match self.span {
            Some(span) if self.t1.is_none() => (t1 - span.max(0.0)).max(0.0),
            _ => self.t0.max(0.0),
        }
    }
}

fn default_rows() -> usize {
    100
}
fn default_width() -> usize {
    1000
}
fn default_arrows() -> usize {
    500
}

/// One viewport of a program's thread life-time view: at most 1000 rows, 8192 pixels and
/// 5000 arrows, however large the program's history.
async fn timeline(State(shared): State<Arc<Shared>>, Query(q): Query<TimelineQuery>) -> Response {
    if shared.access.check(q.token.as_deref()).is_none() {
        return refuse(&shared, q.token.as_deref());
    }
    let r0 = q.r0;
    let r1 = q.r1.clamp(r0, r0.saturating_add(1000));
    let (w, arrows) = (q.w.clamp(1, 8192), q.arrows.min(5000));
    let tile = shared.programs.with(q.pid, |p| {
        p.lifetimes.release_stalled(Instant::now());
        let t1 = q.t1.unwrap_or_else(|| p.lifetimes.now_s());
        let t0 = q.start(t1);
        p.lifetimes.tile(q.pid, r0..r1, t0, t1.max(t0), w, arrows)
    });
    match tile {
        Some(tile) => (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string(&tile).expect("page messages always serialize"),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!(
                "no program {} at this hub: `gyr ps` lists the programs",
                q.pid
            ),
        )
            .into_response(),
    }
}

/// `/api/mpi`'s query: a program that is a rank of the job.
#[derive(Debug, serde::Deserialize)]
struct MpiQuery {
    token: Option<String>,
    pid: u32,
}

/// The MPI views of the job program `pid` is a rank of (bounded as `crate::mpi` says).
async fn mpi(State(shared): State<Arc<Shared>>, Query(q): Query<MpiQuery>) -> Response {
    if shared.access.check(q.token.as_deref()).is_none() {
        return refuse(&shared, q.token.as_deref());
    }
    match shared.mpi_view(q.pid) {
        Some(v) => (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string(&v).expect("page messages always serialize"),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!(
                "program {} is no rank of an MPI job: ranks announce themselves with gyr.msg.rank (gyr::msg::init, or gyr run --mpi)",
                q.pid
            ),
        )
            .into_response(),
    }
}

/// One viewport of the per-rank timelines of the job program `pid` is a rank of (any rank's
/// pid names the job): rows are ranks, times seconds from the job's origin; at most 1000 rows,
/// 8192 pixels and 5000 arrows, like `/api/timeline`.
async fn mpi_timeline(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<TimelineQuery>,
) -> Response {
    if shared.access.check(q.token.as_deref()).is_none() {
        return refuse(&shared, q.token.as_deref());
    }
    let r0 = q.r0;
    let r1 = q.r1.clamp(r0, r0.saturating_add(1000));
    let (w, arrows) = (q.w.clamp(1, 8192), q.arrows.min(5000));
    let tile = shared
        .mpi
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .tile_of(q.pid, r0..r1, |t1| q.start(t1), q.t1, w, arrows);
    match tile {
        Some(tile) => (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_string(&tile).expect("page messages always serialize"),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!(
                "program {} is no rank of an MPI job: ranks announce themselves with gyr.msg.rank (gyr::msg::init, or gyr run --mpi)",
                q.pid
            ),
        )
            .into_response(),
    }
}

/// Prometheus's scrape (`crate::metrics`). A scraper sends no `Origin`, and the `Host` it
/// names is checked as every request's; where the hub asks for a token it takes the read
/// token (or the steer token) as `Authorization: Bearer TOKEN`, as Prometheus's
/// `authorization` setting sends it, or as the `token` query parameter.
async fn metrics(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    Query(q): Query<TokenQuery>,
) -> Response {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).trim());
    let token = bearer.or(q.token.as_deref());
    if shared.access.check(token).is_none() {
        return refuse(&shared, token);
    }
    let text = crate::metrics::render(&shared);
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], text).into_response()
}

async fn ws(
    upgrade: WebSocketUpgrade,
    State(shared): State<Arc<Shared>>,
    Query(q): Query<TokenQuery>,
) -> Response {
    let Some(steer) = shared.access.check(q.token.as_deref()) else {
        return refuse(&shared, q.token.as_deref());
    };
    upgrade.on_upgrade(move |socket| page(socket, shared, steer))
}

/// Everything a page needs to start from.
fn snapshot(shared: &Shared) -> ToPage {
    let mut snap = crate::view::snapshot(&shared.programs, Instant::now());
    snap.replay = shared.replay.as_ref().map(|r| r.state());
    snap.hub = shared.hub_state();
    ToPage::Snapshot(snap)
}

async fn send(socket: &mut WebSocket, m: &ToPage) -> bool {
    let text = serde_json::to_string(m).expect("page messages always serialize");
    socket.send(Message::Text(text.into())).await.is_ok()
}

/// One browser page, until it goes away.
async fn page(mut socket: WebSocket, shared: Arc<Shared>, steer: bool) {
    let mut updates = shared.updates.subscribe();
    let generation = || shared.replay.as_ref().map(|r| r.generation());
    let mut seen = generation();
    let snap = snapshot(&shared);
    if !send(&mut socket, &snap).await {
        return;
    }
    loop {
        tokio::select! {
            u = updates.recv() => match u {
                // A replay seek started the analyses over: a fresh snapshot replaces the page's.
                Ok(_) if generation() != seen => {
                    seen = generation();
                    if !send(&mut socket, &snapshot(&shared)).await {
                        return;
                    }
                }
                Ok(text) => {
                    if socket.send(Message::Text(text.as_str().into())).await.is_err() {
                        return;
                    }
                }
                // The page fell behind: it gets a fresh snapshot instead of a backlog.
                Err(RecvError::Lagged(_)) => {
                    if !send(&mut socket, &snapshot(&shared)).await {
                        return;
                    }
                }
                Err(RecvError::Closed) => return,
            },
            m = socket.recv() => match m {
                Some(Ok(Message::Text(t))) => {
                    let reply = command(&shared, t.as_str(), steer).await;
                    if !send(&mut socket, &reply).await {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}

fn text_arg(v: &Json) -> v1::Value {
    match v {
        Json::String(s) => v1::Value::text(s.clone()),
        other => v1::Value::text(other.to_string()),
    }
}

/// One message from a page, parsed before anything is done: the id its reply carries, and
/// what it asks for (or why it is not a command).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub struct PageMessage {
    /// The page's `id`, echoed in the reply (`null` if none).
    pub id: Json,
    /// The command, or why the message is not one.
    pub command: Result<PageCommand, String>,
}

/// What a page asks the hub to do.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub enum PageCommand {
    /// Play, pause, speed or seek the replay: any page may.
    Replay {
        /// `play`, `pause`, `speed`, `seek`.
        action: String,
        /// The speed or position.
        value: Option<f64>,
    },
    /// Change a program: only pages with the steer token may.
    Steer {
        /// The program, if the message names one.
        pid: Option<u32>,
        /// What to do to it, or why that cannot be understood (said once the program is
        /// known to be reachable, so that an unreachable program is named first).
        action: Result<SteerAction, String>,
    },
}

/// A change a page asks of a program.
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub enum SteerAction {
    /// Write one attribute or parameter.
    Set(v1::SetRequest),
    /// Run an actuator or function.
    Call(v1::CallRequest),
    /// Pause, resume, step, run until.
    Control(v1::ControlRequest),
    /// Switch or rate-limit sensors; `label` says what was done, for the reply.
    Sensor {
        /// The request to the program.
        request: v1::SensorControlRequest,
        /// `TYPE SETTING`, or `all sensors SETTING`.
        label: String,
    },
}

/// Parses one page message. Pure: it touches no program and no hub state.
#[doc(hidden)]
pub fn parse_page_command(text: &str) -> PageMessage {
    let cmd: Json = match serde_json::from_str(text) {
        Ok(cmd) => cmd,
        Err(e) => {
            return PageMessage {
                id: Json::Null,
                command: Err(format!("not a JSON command: {e}")),
            };
        }
    };
    // The id is echoed even when the rest cannot be understood.
    let id = cmd.get("id").cloned().unwrap_or(Json::Null);
    let op = cmd
        .get("op")
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_owned();
    let request = match serde_json::from_value::<PageRequest>(cmd) {
        Ok(r) => r,
        Err(e) => {
            let known = ["set", "call", "control", "sensor", "line", "replay"];
            let why = if known.contains(&op.as_str()) {
                format!("`{op}` needs other fields: {e}")
            } else {
                format!("unknown command `{op}`: set, call, control, sensor, line or replay")
            };
            // Said once the program is known to be reachable, like any steering mistake.
            let pid = serde_json::from_str::<Json>(text)
                .ok()
                .and_then(|c| c["pid"].as_u64())
                .and_then(|p| u32::try_from(p).ok());
            let command = if op == "replay" {
                Err(why)
            } else {
                Ok(PageCommand::Steer {
                    pid,
                    action: Err(why),
                })
            };
            return PageMessage { id, command };
        }
    };
    let command = match request {
        PageRequest::Replay { action, value, .. } => Ok(PageCommand::Replay { action, value }),
        PageRequest::Set { pid, .. }
        | PageRequest::Call { pid, .. }
        | PageRequest::Control { pid, .. }
        | PageRequest::Sensor { pid, .. }
        | PageRequest::Line { pid, .. } => Ok(PageCommand::Steer {
            pid,
            action: steer_action(request),
        }),
    };
    PageMessage { id, command }
}

/// What the page's command line takes.
const LINE_COMMANDS: &str = "set PATH VALUE, call TARGET ARGS, pause, resume, step [N], until CONDITION, sensors TYPE SETTING";

fn steer_action(request: PageRequest) -> Result<SteerAction, String> {
    use v1::control_request::Action;
    let problem = |e: command::CommandError| e.to_string();
    Ok(match request {
        PageRequest::Set { path, value, .. } => SteerAction::Set(v1::SetRequest {
            writes: vec![v1::PathValue {
                path,
                value: Some(text_arg(&value)),
            }],
        }),
        PageRequest::Call { target, args, .. } => SteerAction::Call(v1::CallRequest {
            target,
            args: args.iter().map(text_arg).collect(),
            timeout_ms: command::DEFAULT_CALL_TIMEOUT_MS,
        }),
        PageRequest::Control {
            action,
            steps,
            until,
            ..
        } => SteerAction::Control(
            match action.as_str() {
                "pause" => Ok(command::control_request(Action::Pause)),
                "resume" => Ok(command::control_request(Action::Resume)),
                "step" => command::step_request(steps.unwrap_or(1)),
                "run-until" => command::until_request(until.as_deref().unwrap_or("")),
                other => return Err(format!("unknown control action `{other}`")),
            }
            .map_err(problem)?,
        ),
        PageRequest::Sensor {
            type_name, setting, ..
        } => {
            let scope = SensorScope::from_word(type_name.as_deref().unwrap_or(""));
            let setting = SensorSetting::parse(&setting).map_err(problem)?;
            SteerAction::Sensor {
                request: command::sensor_request(&scope, setting).map_err(problem)?,
                label: format!("{scope} {setting}"),
            }
        }
        // The page's command line, parsed by the grammar every client shares.
        PageRequest::Line { line, .. } => match Command::parse_line(&line).map_err(problem)? {
            Some(Command::Steer(c)) => match c {
                SteerCommand::Set(r) => SteerAction::Set(r),
                SteerCommand::Call(r) => SteerAction::Call(r),
                SteerCommand::Control(r) => SteerAction::Control(r),
                SteerCommand::Sensors { request, label } => SteerAction::Sensor { request, label },
            },
            None => {
                return Err(
                    "type a command: set, call, pause, resume, step, until or sensors".to_owned(),
                );
            }
            Some(_) => {
                return Err(format!(
                    "the page's command line changes programs: {LINE_COMMANDS} (what the other commands show is on the page)"
                ));
            }
        },
        PageRequest::Replay { .. } => return Err("a replay command is not a change".to_owned()),
    })
}

/// Runs one command from a page and says how it went: `{t: "reply", id, ok, result | error}`.
pub(crate) async fn command(shared: &Shared, text: &str, steer: bool) -> ToPage {
    let PageMessage { id, command } = parse_page_command(text);
    let result = match command {
        Err(e) => Err(e),
        Ok(PageCommand::Replay { action, value }) => replay_command(shared, &action, value),
        Ok(PageCommand::Steer { pid, action }) if steer => run(shared, pid, action).await,
        Ok(PageCommand::Steer { .. }) => Err("this page has a watch-only token: open it with the hub's steer token to change programs".to_owned()),
    };
    let (ok, result, error) = match result {
        Ok(r) => (true, Some(r), None),
        Err(e) => (false, None, Some(e)),
    };
    ToPage::Reply(Reply {
        id,
        ok,
        result,
        error,
    })
}

/// Play, pause, speed, seek: what pages see changes for every page, so any page may do it.
fn replay_command(shared: &Shared, action: &str, value: Option<f64>) -> Result<String, String> {
    let r = shared
        .replay
        .as_ref()
        .ok_or("the hub is not replaying: replay commands need `gyr hub --replay FILE...`")?;
    r.command(action, value)
}

async fn run(
    shared: &Shared,
    pid: Option<u32>,
    action: Result<SteerAction, String>,
) -> Result<String, String> {
    let pid = pid.ok_or("the command names no program (pid)")?;
    let pc = shared.clients().get(&pid).cloned().ok_or_else(|| {
        let known = shared.programs.get(pid);
        let known = known.as_deref().map(crate::program::lock);
        match known.as_deref() {
            Some(p) if p.source == crate::program::Source::Replay => {
                format!(
                    "program {pid} is a recording being replayed: it can be watched, not steered"
                )
            }
            Some(p) if !p.alive => format!("program {pid} has ended"),
            Some(_) => format!("the hub cannot reach program {pid}'s server to steer it"),
            None => format!("the hub watches no program {pid}"),
        }
    })?;
    let mut c = pc.inner.clone();
    let who = "gyr-web";
    let s = |e: tonic::Status| e.message().to_owned();
    match action? {
        SteerAction::Set(req) => {
            let r = c.set(pc.req(req, who)).await.map_err(s)?.into_inner();
            Ok(r.changes
                .iter()
                .map(|ch| {
                    format!(
                        "{}: {} -> {}",
                        ch.path,
                        ch.old.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                        ch.new.as_ref().map(|v| v.to_string()).unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join("; "))
        }
        SteerAction::Call(req) => {
            let r = c.call(pc.req(req, who)).await.map_err(s)?.into_inner();
            Ok(r.result.map(|v| v.to_string()).unwrap_or_default())
        }
        SteerAction::Control(req) => {
            let r = c.control(pc.req(req, who)).await.map_err(s)?.into_inner();
            Ok(r.state.map(|s| s.text).unwrap_or_default())
        }
        SteerAction::Sensor { request, label } => {
            c.sensor_control(pc.req(request, who)).await.map_err(s)?;
            Ok(label)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{PageCommand, SteerAction, parse_page_command};

    fn action(text: &str) -> Result<SteerAction, String> {
        match parse_page_command(text).command {
            Ok(PageCommand::Steer { action, .. }) => action,
            other => panic!("{other:?}"),
        }
    }

    /// The page's command line is parsed by the grammar `gyr attach` uses: the same words
    /// make the same request, and the same mistakes the same refusal.
    #[test]
    fn the_command_line_reads_as_attach_reads_it() {
        match action(r#"{"op":"line","pid":7,"line":"set nbody.dt 0.02"}"#).unwrap() {
            SteerAction::Set(r) => assert_eq!(r.writes[0].path, "nbody.dt"),
            other => panic!("{other:?}"),
        }
        match action(r#"{"op":"line","line":"sensors energy every 10"}"#).unwrap() {
            SteerAction::Sensor { request, label } => {
                assert_eq!(request.every_nth, Some(10));
                assert_eq!(label, "energy every 10");
            }
            other => panic!("{other:?}"),
        }
        match action(r#"{"op":"line","line":"step 3"}"#).unwrap() {
            SteerAction::Control(r) => assert_eq!(r.steps, 3),
            other => panic!("{other:?}"),
        }
        let e = action(r#"{"op":"line","line":"step 0"}"#).unwrap_err();
        assert!(e.contains("1 or more"), "{e}");
        let e = action(r#"{"op":"line","line":"warp 9"}"#).unwrap_err();
        assert!(e.contains("unknown command `warp`"), "{e}");
        let e = action(r#"{"op":"line","line":"ls"}"#).unwrap_err();
        assert!(e.contains("changes programs"), "{e}");
        // The buttons' messages go through the same checks.
        let e = action(r#"{"op":"sensor","type":"energy","setting":"every 0"}"#).unwrap_err();
        assert!(e.contains("use `all` or `on`"), "{e}");
    }
}
