//! Connecting to a `Gyr` server and talking to it: [`Target`] names what to connect to (a
//! program by pid through its Unix socket, a server at `host:port` over TCP, or a program
//! behind a hub as `PID@HUB`), [`Client`] is the async client that puts the client's name,
//! token and program on every request, and [`Session`] wraps it in blocking calls, so that
//! one-shot commands, `gyr attach` and `gyr script` share one way of talking to a program.

use crate::discovery::{self, DirError};
use crate::{CLIENT_HEADER, connect};
use gyr_proto::v1::gyr_client::GyrClient;
use gyr_proto::{PROTOCOL_VERSION, v1};
use std::fmt;
use std::str::FromStr;
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

/// Why a client could not do what it was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The target is not one of the forms [`Target`] knows.
    #[error(
        "`{0}` is neither a pid, a host:port address, nor pid@host:port (a program behind a hub)"
    )]
    BadTarget(String),
    /// `X@HUB` where X is not a pid.
    #[error("`{target}`: before the @ comes the program's pid (`gyr ps --hub {hub}` lists them)")]
    BadPid {
        /// The target as given.
        target: String,
        /// The hub it names.
        hub: String,
    },
    /// No program with this pid announced itself.
    #[error("no gyr program with pid {pid} is running{}; `gyr ps` lists them", running_list(.running))]
    NotRunning {
        /// The pid asked for.
        pid: u32,
        /// The pids that are running.
        running: Vec<u32>,
    },
    /// The server could not be reached.
    #[error("cannot connect to {what}: {source}")]
    Connect {
        /// What was connected to, as a user reads it.
        what: String,
        /// Why not.
        source: tonic::transport::Error,
    },
    /// The announcement directory cannot be trusted or read.
    #[error(transparent)]
    Discovery(#[from] DirError),
    /// The async runtime behind a [`Session`] could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The server refused the request; the message is the server's (a program's text: show
    /// it with its control characters made visible).
    #[error("{0}")]
    Refused(String),
    /// The program went away (its server closed the connection).
    #[error("program {target} went away: {message}")]
    Gone {
        /// The program as the user named it.
        target: String,
        /// What the transport said.
        message: String,
    },
}

fn running_list(running: &[u32]) -> String {
    if running.is_empty() {
        String::new()
    } else {
        let pids: Vec<String> = running.iter().map(u32::to_string).collect();
        format!(" (running: {})", pids.join(", "))
    }
}

impl ClientError {
    /// Whether the user's input was at fault (a wrong target, a refused request), as opposed
    /// to the machine or the program (a program that went away, a runtime that cannot start).
    pub fn is_user_error(&self) -> bool {
        matches!(
            self,
            ClientError::BadTarget(_)
                | ClientError::BadPid { .. }
                | ClientError::NotRunning { .. }
                | ClientError::Connect { .. }
                | ClientError::Refused(_)
        )
    }

    /// A server's refusal, or, when the program is gone, an error saying so.
    pub fn from_status(target: &str, s: tonic::Status) -> ClientError {
        use tonic::Code;
        let m = s.message();
        match s.code() {
            Code::Unavailable | Code::Unknown | Code::Cancelled
                if m.contains("transport")
                    || m.contains("connect")
                    || m.contains("h2 protocol")
                    || m.contains("closed") =>
            {
                ClientError::Gone {
                    target: target.to_owned(),
                    message: m.to_owned(),
                }
            }
            _ => ClientError::Refused(m.to_owned()),
        }
    }
}

/// What a client connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A program on this machine, found by its announcement.
    Pid(u32),
    /// A server (a program's TCP listener or a hub) at `host:port`.
    Address(String),
    /// A program behind the hub at `hub` (`PID@HOST:PORT`).
    Behind {
        /// The program's pid.
        pid: u32,
        /// The hub's `host:port`.
        hub: String,
    },
}

impl FromStr for Target {
    type Err = ClientError;

    fn from_str(target: &str) -> Result<Target, ClientError> {
        if let Some((pid, hub)) = target.split_once('@') {
            let pid = pid.parse::<u32>().map_err(|_| ClientError::BadPid {
                target: target.to_owned(),
                hub: hub.to_owned(),
            })?;
            if !hub.contains(':') {
                return Err(ClientError::BadTarget(target.to_owned()));
            }
            return Ok(Target::Behind {
                pid,
                hub: hub.to_owned(),
            });
        }
        if let Ok(pid) = target.parse::<u32>() {
            return Ok(Target::Pid(pid));
        }
        if target.contains(':') {
            return Ok(Target::Address(target.to_owned()));
        }
        Err(ClientError::BadTarget(target.to_owned()))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Pid(pid) => write!(f, "{pid}"),
            Target::Address(a) => f.write_str(a),
            Target::Behind { pid, hub } => write!(f, "{pid}@{hub}"),
        }
    }
}

/// A connected client; every request carries the client's name and token, and on a hub the
/// program it is about.
#[derive(Debug, Clone)]
pub struct Client {
    /// The generated client, for calls [`Client::req`] wraps.
    pub inner: GyrClient<Channel>,
    token: Option<String>,
    name: &'static str,
    /// On a hub: the program every request is about.
    process: Option<u32>,
}

impl Client {
    /// Connects to `target`. Over TCP without a token given, `GYR_TOKEN` is used.
    pub async fn connect(
        target: &Target,
        token: Option<String>,
        name: &'static str,
    ) -> Result<Client, ClientError> {
        let (channel, token, process) = match target {
            Target::Pid(pid) => {
                let found = discovery::discover()?;
                let Some(a) = found.iter().find(|a| a.pid == *pid) else {
                    return Err(ClientError::NotRunning {
                        pid: *pid,
                        running: found.iter().map(|a| a.pid).collect(),
                    });
                };
                let channel =
                    connect::unix(&a.socket)
                        .await
                        .map_err(|source| ClientError::Connect {
                            what: format!("program {pid} at {}", a.socket.display()),
                            source,
                        })?;
                (channel, token, None)
            }
            Target::Address(address) | Target::Behind { hub: address, .. } => {
                let token = token.or_else(|| std::env::var("GYR_TOKEN").ok());
                let channel =
                    connect::tcp(address)
                        .await
                        .map_err(|source| ClientError::Connect {
                            what: address.clone(),
                            source,
                        })?;
                let process = match target {
                    Target::Behind { pid, .. } => Some(*pid),
                    _ => None,
                };
                (channel, token, process)
            }
        };
        Ok(Client {
            inner: GyrClient::new(channel),
            token,
            name,
            process,
        })
    }

    /// Wraps a message with the client's name, token and program.
    pub fn req<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        r.metadata_mut()
            .insert(CLIENT_HEADER, MetadataValue::from_static(self.name));
        if let Some(t) = &self.token
            && let Ok(v) = format!("Bearer {t}").parse()
        {
            r.metadata_mut().insert("authorization", v);
        }
        if let Some(pid) = self.process {
            r.metadata_mut()
                .insert(gyr_proto::PROCESS_HEADER, MetadataValue::from(pid));
        }
        r
    }
}

/// A blocking connection to one program: what `gyr attach`, `gyr script` and the one-shot
/// commands use.
#[derive(Debug)]
pub struct Session {
    rt: tokio::runtime::Runtime,
    client: Client,
    /// The program as the user named it (pid or host:port), for messages.
    pub target: String,
    /// The server's handshake answer: pid, command line, permission.
    pub hello: v1::HandshakeReply,
}

/// Runs one request on a session: `call!(session, method, message)`.
macro_rules! call {
    ($s:expr, $method:ident, $msg:expr) => {{
        let s = &mut *$s;
        let req = s.client.req($msg);
        let mut inner = s.client.inner.clone();
        s.rt.block_on(inner.$method(req))
            .map(|r| r.into_inner())
            .map_err(|e| ClientError::from_status(&s.target, e))
    }};
}

impl Session {
    /// Connects to `target` (any form [`Target`] reads) and shakes hands, which checks the
    /// protocol version and the token.
    pub fn connect(
        target: &str,
        token: Option<String>,
        name: &'static str,
    ) -> Result<Session, ClientError> {
        let parsed: Target = target.parse()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ClientError::Runtime)?;
        let client = rt.block_on(Client::connect(&parsed, token, name))?;
        let mut s = Session {
            rt,
            client,
            target: target.to_owned(),
            hello: v1::HandshakeReply::default(),
        };
        s.hello = call!(
            &mut s,
            handshake,
            v1::HandshakeRequest {
                protocol_version: PROTOCOL_VERSION,
                client: name.to_owned(),
            }
        )?;
        Ok(s)
    }

    /// The program's steered objects and their attributes.
    pub fn list(&mut self) -> Result<v1::ListObjectsReply, ClientError> {
        call!(self, list_objects, v1::ListObjectsRequest {})
    }

    /// Reads attributes by path.
    pub fn get(&mut self, paths: Vec<String>) -> Result<Vec<v1::PathValue>, ClientError> {
        call!(self, get, v1::GetRequest { paths }).map(|r| r.values)
    }

    /// Writes attributes; all or none are applied.
    pub fn set(&mut self, writes: Vec<v1::PathValue>) -> Result<Vec<v1::Change>, ClientError> {
        call!(self, set, v1::SetRequest { writes }).map(|r| r.changes)
    }

    /// Calls an actuator or steering function, waiting at most `timeout_ms` for the program.
    pub fn call(
        &mut self,
        target: String,
        args: Vec<v1::Value>,
        timeout_ms: u32,
    ) -> Result<v1::Value, ClientError> {
        call!(
            self,
            call,
            v1::CallRequest {
                target,
                args,
                timeout_ms
            }
        )
        .map(|r| r.result.unwrap_or_default())
    }

    /// The programs behind the server (on a hub: every program it watches).
    pub fn processes(&mut self) -> Result<Vec<v1::ProcessInfo>, ClientError> {
        call!(self, list_processes, v1::ListProcessesRequest {}).map(|r| r.processes)
    }

    /// The expert-system rules the server runs, with their state.
    pub fn rules(&mut self) -> Result<v1::ListRulesReply, ClientError> {
        call!(self, list_rules, v1::ListRulesRequest {})
    }

    /// The alerts a hub keeps: `pid` 0 for every program's, at most `limit` (0: all), oldest
    /// first.
    pub fn alerts(&mut self, pid: u32, limit: u32) -> Result<Vec<v1::AlertInfo>, ClientError> {
        call!(self, list_alerts, v1::ListAlertsRequest { pid, limit }).map(|r| r.alerts)
    }

    /// The program's run state, rates and losses.
    pub fn status(&mut self) -> Result<v1::StatusReply, ClientError> {
        call!(self, status, v1::StatusRequest {})
    }

    /// Pauses, resumes, steps or runs the program until a condition.
    pub fn control(&mut self, req: v1::ControlRequest) -> Result<v1::StatusReply, ClientError> {
        call!(self, control, req)
    }

    /// The program's sensors and their settings.
    pub fn sensors(&mut self) -> Result<v1::SensorsReply, ClientError> {
        call!(self, list_sensors, v1::ListSensorsRequest {})
    }

    /// Turns sensors on or off, or samples them.
    pub fn sensor_control(
        &mut self,
        req: v1::SensorControlRequest,
    ) -> Result<v1::SensorsReply, ClientError> {
        call!(self, sensor_control, req)
    }

    /// Opens the live event stream; read it with [`Session::next`].
    pub fn subscribe(
        &mut self,
        types: Vec<String>,
        threads: Vec<u64>,
    ) -> Result<tonic::Streaming<v1::EventBatch>, ClientError> {
        call!(
            self,
            subscribe,
            v1::SubscribeRequest {
                types,
                threads,
                decoded: false,
            }
        )
    }

    /// Opens the steering log, from entry `after` on; `follow` keeps it open for new entries.
    pub fn log(
        &mut self,
        after: u64,
        follow: bool,
    ) -> Result<tonic::Streaming<v1::LogEntry>, ClientError> {
        call!(self, log, v1::LogRequest { after, follow })
    }

    /// The next message of a stream; `None` when the program closed it.
    pub fn next<T>(&mut self, stream: &mut tonic::Streaming<T>) -> Result<Option<T>, ClientError> {
        let target = &self.target;
        self.rt
            .block_on(stream.message())
            .map_err(|e| ClientError::from_status(target, e))
    }

    /// Like [`Session::next`], but waits at most `timeout`: `Ok(None)` when the time ran out,
    /// `Ok(Some(None))` when the stream ended.
    pub fn next_within<T>(
        &mut self,
        stream: &mut tonic::Streaming<T>,
        timeout: std::time::Duration,
    ) -> Result<Option<Option<T>>, ClientError> {
        let target = &self.target;
        match self
            .rt
            .block_on(async { tokio::time::timeout(timeout, stream.message()).await })
        {
            Err(_elapsed) => Ok(None),
            Ok(r) => r.map(Some).map_err(|e| ClientError::from_status(target, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ClientError, Target};

    #[test]
    fn targets_read_in_each_form() {
        assert_eq!("4242".parse::<Target>().unwrap(), Target::Pid(4242));
        assert_eq!(
            "127.0.0.1:7071".parse::<Target>().unwrap(),
            Target::Address("127.0.0.1:7071".into())
        );
        assert_eq!(
            "17@hub.example:7071".parse::<Target>().unwrap(),
            Target::Behind {
                pid: 17,
                hub: "hub.example:7071".into()
            }
        );
        for t in ["4242", "127.0.0.1:7071", "17@h:1"] {
            assert_eq!(t.parse::<Target>().unwrap().to_string(), t);
        }
    }

    #[test]
    fn malformed_targets_say_what_is_expected() {
        let e = "nbody".parse::<Target>().unwrap_err();
        assert!(matches!(e, ClientError::BadTarget(_)) && e.is_user_error());
        assert!(e.to_string().contains("neither a pid"), "{e}");
        let e = "x@h:1".parse::<Target>().unwrap_err();
        assert!(e.to_string().contains("gyr ps --hub h:1"), "{e}");
        assert!("17@nohub".parse::<Target>().is_err());
    }

    #[test]
    fn a_closed_transport_reads_as_a_program_gone_and_anything_else_as_a_refusal() {
        let gone = ClientError::from_status("42", tonic::Status::unavailable("transport error"));
        assert!(matches!(gone, ClientError::Gone { .. }) && !gone.is_user_error());
        let no = ClientError::from_status("42", tonic::Status::not_found("no object `x`"));
        assert_eq!(no.to_string(), "no object `x`");
        assert!(no.is_user_error());
    }
}
