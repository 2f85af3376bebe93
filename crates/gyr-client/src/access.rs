//! Who may call a server of `gyr.v1.Gyr`, checked one way by both servers (a program's embedded
//! server and the hub): the bearer token, read tokens kept from steering, the protocol version
//! at the handshake, and the refusals a client sees for each.
//!
//! # Tokens
//!
//! A listener either asks for no token (a program's private Unix socket, a hub on loopback
//! without `--token`: whoever can connect may steer), or asks for its steer token on every call
//! and may also take a read token, which watches but never steers. Tokens travel as
//! `authorization: Bearer TOKEN` and are compared in constant time ([`crate::token::matches`]).
//!
//! A call the listener takes marks its connection accepted ([`gyr_proto::listen::mark`]), so a
//! guarded TCP listener keeps it open; a refused one leaves it to time out.
//!
//! # Reflection and health
//!
//! Server reflection describes only the published `.proto` files, and is a reading call: it
//! takes any token that watches (read or steer) where tokens are asked for
//! ([`Access::watch_gate`]). `grpc.health.v1` says no more than that the server answers, and
//! health probes often cannot send headers: it takes every caller ([`Access::health_gate`]),
//! but only a call with a valid token marks the connection, so a guarded TCP listener still
//! closes one that never shows a token.
//!
//! # Refusals
//!
//! Both servers refuse with the same status codes ([`Refusal`]): a missing or wrong token is
//! `UNAUTHENTICATED`, a read token on a steering call `PERMISSION_DENIED`, another protocol
//! version `FAILED_PRECONDITION`. The messages name the server ([`Server`]) so that a user
//! talking to a hub is not told to fix a program, and the reverse.

use crate::CLIENT_HEADER;
use crate::token::matches;
use gyr_proto::listen::ConnectionInfo;
use gyr_proto::{PROTOCOL_VERSION, v1};
use tonic::{Request, Response, Status};

/// The request header a bearer token travels in.
pub const AUTHORIZATION_HEADER: &str = "authorization";

/// Which kind of server checks a call: its refusals name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// A program's embedded server.
    Program,
    /// The hub (`gyr hub`).
    Hub,
}

impl Server {
    /// How refusals name the server: "this program", "this hub".
    pub fn name(self) -> &'static str {
        match self {
            Server::Program => "this program",
            Server::Hub => "this hub",
        }
    }

    /// What a call without a token is told to do; only a program's TCP listener asks for one.
    fn needs_token(self) -> &'static str {
        match self {
            Server::Program => {
                "this program's TCP listener needs a token: pass --token (or set GYR_TOKEN)"
            }
            Server::Hub => "this hub needs a token: pass --token (or set GYR_TOKEN)",
        }
    }

    /// Which token steers, as a user holding the read token is told.
    fn steer_token(self) -> &'static str {
        match self {
            Server::Program => "the steer token",
            Server::Hub => "the hub's steer token",
        }
    }
}

/// Why a server refuses a call before acting on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The listener asks for a token and the call carries none.
    #[error("{}", .server.needs_token())]
    NoToken {
        /// Who refuses.
        server: Server,
    },
    /// The call's token is neither the steer token nor the read token.
    #[error("the token is not valid for {}", .server.name())]
    WrongToken {
        /// Who refuses.
        server: Server,
    },
    /// The read token, on a call that steers.
    #[error("this token may watch but not steer: use {}", .server.steer_token())]
    ReadOnly {
        /// Who refuses.
        server: Server,
    },
}

impl From<Refusal> for Status {
    fn from(r: Refusal) -> Status {
        let msg = r.to_string();
        match r {
            Refusal::NoToken { .. } | Refusal::WrongToken { .. } => Status::unauthenticated(msg),
            Refusal::ReadOnly { .. } => Status::permission_denied(msg),
        }
    }
}

/// Who may do what on one listener.
#[derive(Debug, Clone)]
pub struct Access {
    server: Server,
    /// `None`: no token is asked for, and everyone who can connect may steer.
    steer: Option<String>,
    /// Watches only; taken only where a steer token is asked for.
    read: Option<String>,
}

impl Access {
    /// A listener asking for no token: whoever can connect may steer.
    pub fn open(server: Server) -> Self {
        Access {
            server,
            steer: None,
            read: None,
        }
    }

    /// A listener asking for `steer` on every call, or for `read` to watch only.
    pub fn tokens(server: Server, steer: String, read: Option<String>) -> Self {
        Access {
            server,
            steer: Some(steer),
            read,
        }
    }

    /// Whether tokens are asked for at all.
    pub fn guarded(&self) -> bool {
        self.steer.is_some()
    }

    /// Whether `token` may steer (`Some(true)`), only watch (`Some(false)`), or nothing
    /// (`None`).
    pub fn check(&self, token: Option<&str>) -> Option<bool> {
        match (&self.steer, token) {
            (None, _) => Some(true),
            (Some(s), Some(t)) if matches(t, s) => Some(true),
            (Some(_), Some(t)) if self.read.as_deref().is_some_and(|r| matches(t, r)) => {
                Some(false)
            }
            _ => None,
        }
    }

    /// Whether the caller of `req` may steer; refuses a caller without a valid token where one
    /// is asked for, and marks the connection of one it takes.
    pub fn permission<T>(&self, req: &Request<T>) -> Result<bool, Refusal> {
        let token = bearer(req);
        let server = self.server;
        match self.check(token) {
            Some(steer) => {
                gyr_proto::listen::mark(req);
                Ok(steer)
            }
            None if token.is_some() => Err(Refusal::WrongToken { server }),
            None => Err(Refusal::NoToken { server }),
        }
    }

    /// Refuses the caller of `req` unless it may steer.
    pub fn steer_permission<T>(&self, req: &Request<T>) -> Result<(), Refusal> {
        if self.permission(req)? {
            Ok(())
        } else {
            Err(Refusal::ReadOnly {
                server: self.server,
            })
        }
    }

    /// An interceptor letting through the callers that may watch (server reflection).
    pub fn watch_gate(
        &self,
    ) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone + Send + Sync + 'static
    {
        let access = self.clone();
        move |req| {
            access.permission(&req)?;
            Ok(req)
        }
    }

    /// An interceptor letting every caller through (`grpc.health.v1`), marking the connection
    /// of one with a valid token.
    pub fn health_gate(
        &self,
    ) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone + Send + Sync + 'static
    {
        let access = self.clone();
        move |req| {
            let _ = access.permission(&req);
            Ok(req)
        }
    }

    /// A handshake's checks, the caller's token first and then its protocol version (which
    /// must be set); whether it may steer. The name the client gives (`client`) is kept with
    /// its connection for the steering log ([`client_name`]).
    pub fn handshake(&self, req: &Request<v1::HandshakeRequest>) -> Result<bool, Status> {
        let can_steer = self.permission(req)?;
        gyr_proto::check_version(
            req.get_ref().protocol_version,
            self.server.name(),
            "the client",
        )?;
        if let Some(c) = req.extensions().get::<ConnectionInfo>() {
            c.client.set(&req.get_ref().client);
        }
        Ok(can_steer)
    }

    /// A ping's answer, its payload echoed to a caller the listener takes: always the called
    /// server's own, never forwarded, so that it times the round trip to that server.
    pub fn ping(&self, req: Request<v1::PingRequest>) -> Result<Response<v1::PingReply>, Status> {
        self.permission(&req)?;
        Ok(Response::new(v1::PingReply {
            payload: req.into_inner().payload,
        }))
    }

    /// The answer to a handshake this server took, about the program `pid` running
    /// `command_line` (for the hub without a program named: the hub itself).
    pub fn handshake_reply(
        &self,
        can_steer: bool,
        pid: u32,
        command_line: Vec<String>,
    ) -> v1::HandshakeReply {
        v1::HandshakeReply {
            protocol_version: PROTOCOL_VERSION,
            pid,
            command_line,
            can_steer,
            gyr_version: env!("CARGO_PKG_VERSION").to_owned(),
            hub: self.server == Server::Hub,
        }
    }
}

/// The bearer token `req` carries, with or without the `Bearer ` scheme.
pub fn bearer<T>(req: &Request<T>) -> Option<&str> {
    let v = req.metadata().get(AUTHORIZATION_HEADER)?.to_str().ok()?;
    Some(v.strip_prefix("Bearer ").unwrap_or(v))
}

/// The name the caller of `req` gives itself, for the steering log: the `client` of its
/// connection's handshake, else the [`CLIENT_HEADER`] header, else "client".
pub fn client_name<T>(req: &Request<T>) -> String {
    if let Some(name) = req
        .extensions()
        .get::<ConnectionInfo>()
        .and_then(|c| c.client.get())
    {
        return name;
    }
    req.metadata()
        .get(CLIENT_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("client")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyr_proto::listen::Authenticated;
    use tonic::Code;

    const STEER: &str = "steer-0123456789abcdef";
    const READ: &str = "read-0123456789abcdef";

    fn guarded(server: Server) -> Access {
        Access::tokens(server, STEER.into(), Some(READ.into()))
    }

    /// A request carrying `authorization` (when given), on a connection whose mark is returned.
    fn request(authorization: Option<&str>) -> (Request<()>, Authenticated) {
        let mut req = Request::new(());
        if let Some(a) = authorization {
            req.metadata_mut()
                .insert(AUTHORIZATION_HEADER, a.parse().unwrap());
        }
        let mark = Authenticated::default();
        req.extensions_mut().insert(ConnectionInfo {
            authenticated: mark.clone(),
            ..ConnectionInfo::default()
        });
        (req, mark)
    }

    fn handshake(authorization: Option<&str>, version: u32) -> Request<v1::HandshakeRequest> {
        let (req, _) = request(authorization);
        let (meta, ext, ()) = req.into_parts();
        Request::from_parts(
            meta,
            ext,
            v1::HandshakeRequest {
                protocol_version: version,
                ..Default::default()
            },
        )
    }

    /// The code and message a client gets for `r`.
    fn refused<T>(r: Result<T, impl Into<Status>>) -> (Code, String) {
        let s: Status = r.map(|_| ()).map_err(Into::into).unwrap_err();
        (s.code(), s.message().to_owned())
    }

    #[test]
    fn an_open_listener_lets_anyone_steer() {
        let a = Access::open(Server::Program);
        assert!(!a.guarded());
        for token in [None, Some("anything")] {
            let (req, mark) = request(token);
            assert_eq!(a.permission(&req), Ok(true));
            assert!(a.steer_permission(&req).is_ok());
            assert!(mark.is_marked());
        }
    }

    #[test]
    fn each_token_grants_its_own() {
        let a = guarded(Server::Hub);
        assert!(a.guarded());
        assert_eq!(a.check(Some(STEER)), Some(true));
        assert_eq!(a.check(Some(READ)), Some(false));
        assert_eq!(a.check(Some("steer-0123456789abcdeF")), None);
        assert_eq!(a.check(Some(&format!("{STEER}0"))), None);
        assert_eq!(a.check(Some(&STEER[..STEER.len() - 1])), None);
        assert_eq!(a.check(None), None);
        for header in [format!("Bearer {STEER}"), STEER.to_owned()] {
            let (req, mark) = request(Some(&header));
            assert_eq!(a.permission(&req), Ok(true), "{header}");
            assert!(mark.is_marked());
        }
        let (req, mark) = request(Some(&format!("Bearer {READ}")));
        assert_eq!(a.permission(&req), Ok(false));
        assert!(mark.is_marked());
    }

    #[test]
    fn without_a_read_token_only_the_steer_token_is_taken() {
        let a = Access::tokens(Server::Program, STEER.into(), None);
        assert_eq!(a.check(Some(STEER)), Some(true));
        assert_eq!(a.check(Some(READ)), None);
        assert_eq!(a.check(Some("")), None);
    }

    #[test]
    fn refusals_keep_their_codes_and_words() {
        let cases = [
            (
                Server::Program,
                None,
                Code::Unauthenticated,
                "this program's TCP listener needs a token: pass --token (or set GYR_TOKEN)",
            ),
            (
                Server::Program,
                Some("Bearer wrong-0123456789abcdef"),
                Code::Unauthenticated,
                "the token is not valid for this program",
            ),
            (
                Server::Hub,
                None,
                Code::Unauthenticated,
                "this hub needs a token: pass --token (or set GYR_TOKEN)",
            ),
            (
                Server::Hub,
                Some("wrong-0123456789abcdef"),
                Code::Unauthenticated,
                "the token is not valid for this hub",
            ),
        ];
        for (server, token, code, msg) in cases {
            let (req, mark) = request(token);
            assert_eq!(
                refused(guarded(server).permission(&req)),
                (code, msg.to_owned())
            );
            assert!(
                !mark.is_marked(),
                "a refused call leaves its connection unmarked"
            );
        }
        for (server, msg) in [
            (
                Server::Program,
                "this token may watch but not steer: use the steer token",
            ),
            (
                Server::Hub,
                "this token may watch but not steer: use the hub's steer token",
            ),
        ] {
            let (req, _) = request(Some(READ));
            assert_eq!(
                refused(guarded(server).steer_permission(&req)),
                (Code::PermissionDenied, msg.to_owned())
            );
        }
    }

    #[test]
    fn a_handshake_checks_the_token_then_the_version() {
        let a = guarded(Server::Program);
        let ok = handshake(Some(READ), PROTOCOL_VERSION);
        assert!(!a.handshake(&ok).unwrap());
        // A client that sets no version (0) is told what to send.
        let (code, msg) = refused(a.handshake(&handshake(Some(STEER), 0)));
        assert_eq!(code, Code::FailedPrecondition);
        assert_eq!(
            msg,
            "the client sent no protocol_version: set protocol_version = 1 (gyr.v1) in its request"
        );
        let (code, msg) = refused(a.handshake(&handshake(Some(STEER), PROTOCOL_VERSION + 1)));
        assert_eq!(code, Code::FailedPrecondition);
        assert!(msg.starts_with("this program speaks gyr protocol"), "{msg}");
        // A stranger learns nothing of the version.
        let (code, _) = refused(a.handshake(&handshake(None, PROTOCOL_VERSION + 1)));
        assert_eq!(code, Code::Unauthenticated);
    }

    #[test]
    fn reflection_takes_a_watcher_and_health_anyone() {
        let a = guarded(Server::Program);
        let mut watch = a.watch_gate();
        let mut health = a.health_gate();
        for token in [Some(READ), Some(STEER)] {
            let (req, mark) = request(token);
            assert!(watch(req).is_ok());
            assert!(mark.is_marked());
        }
        for token in [None, Some("wrong-0123456789abcdef")] {
            let (req, _) = request(token);
            assert_eq!(watch(req).unwrap_err().code(), Code::Unauthenticated);
            let (req, mark) = request(token);
            assert!(health(req).is_ok());
            assert!(
                !mark.is_marked(),
                "a caller without a token is not accepted"
            );
        }
        let (req, mark) = request(Some(READ));
        assert!(health(req).is_ok());
        assert!(mark.is_marked());
        let (req, _) = request(None);
        assert!(Access::open(Server::Hub).watch_gate()(req).is_ok());
    }

    #[test]
    fn the_reply_says_which_server_answers() {
        let program = Access::open(Server::Program).handshake_reply(true, 7, vec!["md".into()]);
        assert!(!program.hub && program.can_steer);
        assert_eq!(
            (program.pid, program.protocol_version),
            (7, PROTOCOL_VERSION)
        );
        assert!(guarded(Server::Hub).handshake_reply(false, 1, vec![]).hub);
    }

    #[test]
    fn a_ping_is_echoed_to_callers_only() {
        let a = guarded(Server::Hub);
        let ping = |token| {
            let (req, _) = request(token);
            let (meta, ext, ()) = req.into_parts();
            let payload = b"abc".to_vec();
            let req = Request::from_parts(meta, ext, v1::PingRequest { payload });
            a.ping(req).map(|r| r.into_inner().payload)
        };
        assert_eq!(ping(Some(READ)).unwrap(), b"abc");
        assert_eq!(ping(None).unwrap_err().code(), Code::Unauthenticated);
    }

    #[test]
    fn the_handshake_names_the_connection_before_the_header() {
        let a = Access::open(Server::Program);
        let mut hello = handshake(None, PROTOCOL_VERSION);
        hello.get_mut().client = "monitor\u{7}.py".into();
        hello
            .metadata_mut()
            .insert(CLIENT_HEADER, "grpc-python".parse().unwrap());
        let info = hello.extensions().get::<ConnectionInfo>().unwrap().clone();
        // Before the handshake, the header names the caller.
        assert_eq!(client_name(&hello), "grpc-python");
        a.handshake(&hello).unwrap();
        // Later calls on the same connection carry the handshake's name, control characters
        // dropped.
        let mut later = Request::new(());
        later.extensions_mut().insert(info.clone());
        later
            .metadata_mut()
            .insert(CLIENT_HEADER, "grpc-python".parse().unwrap());
        assert_eq!(client_name(&later), "monitor.py");
        // A handshake without a name keeps the name; a refused one changes nothing.
        let mut unnamed = handshake(None, PROTOCOL_VERSION);
        unnamed.extensions_mut().insert(info.clone());
        a.handshake(&unnamed).unwrap();
        let mut refused = handshake(None, 0);
        refused.get_mut().client = "other".into();
        refused.extensions_mut().insert(info.clone());
        assert!(a.handshake(&refused).is_err());
        assert_eq!(info.client.get().as_deref(), Some("monitor.py"));
        // A long name is cut.
        info.client.set(&"x".repeat(1000));
        assert_eq!(
            info.client.get().unwrap().len(),
            gyr_proto::listen::ClientName::MAX_LEN
        );
    }

    #[test]
    fn a_caller_without_a_name_is_a_client() {
        let (mut req, _) = request(None);
        assert_eq!(client_name(&req), "client");
        req.metadata_mut()
            .insert(CLIENT_HEADER, "gyr-cli".parse().unwrap());
        assert_eq!(client_name(&req), "gyr-cli");
        assert_eq!(bearer(&req), None);
    }
}
