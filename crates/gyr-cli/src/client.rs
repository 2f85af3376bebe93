//! Connecting to a running program's steering server: by pid through its Unix socket, or by
//! `host:port` over TCP with a token. [`Session`] wraps the async client in blocking calls, so
//! that one-shot commands, `gyr attach` and `gyr script` share one way of talking to a program.

use crate::Failure;
use gyr::server::{CLIENT_HEADER, discovery};
use gyr_proto::v1::gyr_client::GyrClient;
use gyr_proto::{PROTOCOL_VERSION, v1};
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

/// A connected client; every request carries the client's name and token.
#[derive(Clone)]
pub(crate) struct Client {
    pub(crate) inner: GyrClient<Channel>,
    token: Option<String>,
    name: &'static str,
    /// On a hub: the program every request is about.
    process: Option<u32>,
}

/// Starts a small single-threaded runtime.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot start the async runtime: {e}")))
}

impl Client {
    /// Connects to `target`: a pid, `host:port`, or `pid@host:port` (a program behind a hub).
    pub(crate) async fn connect(
        target: &str,
        token: Option<String>,
        name: &'static str,
    ) -> Result<Client, Failure> {
        if let Some((pid, hub)) = target.split_once('@') {
            let pid = pid.parse::<u32>().map_err(|_| {
                Failure::input(anyhow::anyhow!(
                    "`{target}`: before the @ comes the program's pid (`gyr ps --hub {hub}` lists them)"
                ))
            })?;
            let mut c = Box::pin(Client::connect(hub, token, name)).await?;
            c.process = Some(pid);
            return Ok(c);
        }
        if let Ok(pid) = target.parse::<u32>() {
            let found = discovery::discover().map_err(|e| Failure::from(anyhow::Error::new(e)))?;
            let Some(a) = found.iter().find(|a| a.pid == pid) else {
                let running: Vec<String> = found.iter().map(|a| a.pid.to_string()).collect();
                return Err(Failure::input(anyhow::anyhow!(
                    "no gyr program with pid {pid} is running{}; `gyr ps` lists them",
                    if running.is_empty() {
                        String::new()
                    } else {
                        format!(" (running: {})", running.join(", "))
                    }
                )));
            };
            let channel = gyr_proto::connect::unix(&a.socket).await.map_err(|e| {
                Failure::input(anyhow::anyhow!(
                    "cannot connect to program {pid} at {}: {e}",
                    a.socket.display()
                ))
            })?;
            return Ok(Client {
                inner: GyrClient::new(channel),
                token,
                name,
                process: None,
            });
        }
        if !target.contains(':') {
            return Err(Failure::input(anyhow::anyhow!(
                "`{target}` is neither a pid, a host:port address, nor pid@host:port (a program behind a hub)"
            )));
        }
        let token = token.or_else(|| std::env::var("GYR_TOKEN").ok());
        let channel = gyr_proto::connect::tcp(target)
            .await
            .map_err(|e| Failure::input(anyhow::anyhow!("cannot connect to {target}: {e}")))?;
        Ok(Client {
            inner: GyrClient::new(channel),
            token,
            name,
            process: None,
        })
    }

    /// Wraps a message with the client's name and token.
    pub(crate) fn req<T>(&self, msg: T) -> Request<T> {
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

/// Turns a server's refusal into the user's error (exit code 2: what was asked for was wrong),
/// or, when the program is gone, an error saying so (exit code 1).
pub(crate) fn refused(target: &str, s: tonic::Status) -> Failure {
    use tonic::Code;
    // The text comes from the program (or a hub): control characters in it are shown, not
    // sent to the terminal.
    let message = crate::show::printable(s.message());
    match s.code() {
        Code::Unavailable | Code::Unknown | Code::Cancelled
            if s.message().contains("transport")
                || s.message().contains("connect")
                || s.message().contains("h2 protocol")
                || s.message().contains("closed") =>
        {
            Failure::from(anyhow::anyhow!("program {target} went away: {message}"))
        }
        _ => Failure::input(anyhow::anyhow!("{message}")),
    }
}

/// A blocking connection to one program: what `gyr attach`, `gyr script` and the one-shot
/// commands use.
pub(crate) struct Session {
    rt: tokio::runtime::Runtime,
    client: Client,
    /// The program as the user named it (pid or host:port), for messages.
    pub(crate) target: String,
    /// The server's handshake answer: pid, command line, permission.
    pub(crate) hello: v1::HandshakeReply,
}

/// Runs one request on a session: `call!(session, method, message)`.
macro_rules! call {
    ($s:expr, $method:ident, $msg:expr) => {{
        let s = &mut *$s;
        let req = s.client.req($msg);
        let mut inner = s.client.inner.clone();
        s.rt.block_on(inner.$method(req))
            .map(|r| r.into_inner())
            .map_err(|e| refused(&s.target, e))
    }};
}

impl Session {
    /// Connects and shakes hands (which checks the protocol version and the token).
    pub(crate) fn connect(
        target: &str,
        token: Option<String>,
        name: &'static str,
    ) -> Result<Session, Failure> {
        let rt = runtime()?;
        let client = rt.block_on(Client::connect(target, token, name))?;
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

    pub(crate) fn list(&mut self) -> Result<v1::ListObjectsReply, Failure> {
        call!(self, list_objects, v1::ListObjectsRequest {})
    }

    pub(crate) fn get(&mut self, paths: Vec<String>) -> Result<Vec<v1::PathValue>, Failure> {
        call!(self, get, v1::GetRequest { paths }).map(|r| r.values)
    }

    pub(crate) fn set(&mut self, writes: Vec<v1::PathValue>) -> Result<Vec<v1::Change>, Failure> {
        call!(self, set, v1::SetRequest { writes }).map(|r| r.changes)
    }

    pub(crate) fn call(
        &mut self,
        target: String,
        args: Vec<v1::Value>,
        timeout_ms: u32,
    ) -> Result<v1::Value, Failure> {
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
    pub(crate) fn processes(&mut self) -> Result<Vec<v1::ProcessInfo>, Failure> {
        call!(self, list_processes, v1::ListProcessesRequest {}).map(|r| r.processes)
    }

    pub(crate) fn status(&mut self) -> Result<v1::StatusReply, Failure> {
        call!(self, status, v1::StatusRequest {})
    }

    pub(crate) fn control(&mut self, req: v1::ControlRequest) -> Result<v1::StatusReply, Failure> {
        call!(self, control, req)
    }

    pub(crate) fn sensors(&mut self) -> Result<v1::SensorsReply, Failure> {
        call!(self, list_sensors, v1::ListSensorsRequest {})
    }

    pub(crate) fn sensor_control(
        &mut self,
        req: v1::SensorControlRequest,
    ) -> Result<v1::SensorsReply, Failure> {
        call!(self, sensor_control, req)
    }

    /// Opens the live event stream; read it with [`Session::next`].
    pub(crate) fn subscribe(
        &mut self,
        types: Vec<String>,
        threads: Vec<u64>,
    ) -> Result<tonic::Streaming<v1::EventBatch>, Failure> {
        call!(self, subscribe, v1::SubscribeRequest { types, threads })
    }

    /// Opens the steering log, from entry `after` on; `follow` keeps it open for new entries.
    pub(crate) fn log(
        &mut self,
        after: u64,
        follow: bool,
    ) -> Result<tonic::Streaming<v1::LogEntry>, Failure> {
        call!(self, log, v1::LogRequest { after, follow })
    }

    /// The next message of a stream; `None` when the program closed it.
    pub(crate) fn next<T>(
        &mut self,
        stream: &mut tonic::Streaming<T>,
    ) -> Result<Option<T>, Failure> {
        let target = &self.target;
        self.rt
            .block_on(stream.message())
            .map_err(|e| refused(target, e))
    }

    /// Like [`Session::next`], but waits at most `timeout`: `Ok(None)` when the time ran out,
    /// `Ok(Some(None))` when the stream ended.
    pub(crate) fn next_within<T>(
        &mut self,
        stream: &mut tonic::Streaming<T>,
        timeout: std::time::Duration,
    ) -> Result<Option<Option<T>>, Failure> {
        let target = &self.target;
        match self
            .rt
            .block_on(async { tokio::time::timeout(timeout, stream.message()).await })
        {
            Err(_elapsed) => Ok(None),
            Ok(r) => r.map(Some).map_err(|e| refused(target, e)),
        }
    }
}
