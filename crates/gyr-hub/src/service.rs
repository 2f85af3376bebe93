//! The hub's `gyr.v1.Gyr` service: the same API as a program's embedded server, with many
//! programs behind it. A call about one program names it with the `x-gyr-process` header
//! (optional when one live program is watched) and is forwarded to that program's server, so
//! its answer (or refusal) is the program's own; the steering log names the caller "via hub".
//! Subscribe and Log without the header cover every program. Programs publish here.

use crate::Shared;
use crate::input::ProgramClient;
use gyr_client::access;
use gyr_proto::{PROCESS_HEADER, v1};
use std::pin::Pin;
use std::sync::Arc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The service as served: every refusal's message cut to a length any client can receive
/// (the program's own are cut already, this covers the hub's and older programs').
pub(crate) fn server(
    svc: HubService,
) -> gyr_proto::short_errors::ShortErrors<v1::gyr_server::GyrServer<HubService>> {
    gyr_proto::short_errors::ShortErrors::new(v1::gyr_server::GyrServer::new(svc))
}

#[derive(Debug, Clone)]
pub(crate) struct HubService {
    shared: Arc<Shared>,
}

impl HubService {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        HubService { shared }
    }

    /// The program a request names, or the only live one.
    fn named<T>(&self, req: &Request<T>) -> Result<Option<u32>, Status> {
        match req.metadata().get(PROCESS_HEADER) {
            Some(v) => v
                .to_str()
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .map(Some)
                .ok_or_else(|| Status::invalid_argument(format!("{PROCESS_HEADER} must be a pid"))),
            None => Ok(None),
        }
    }

    fn target<T>(&self, req: &Request<T>) -> Result<u32, Status> {
        if let Some(pid) = self.named(req)? {
            return Ok(pid);
        }
        let mut live = Vec::new();
        self.shared.programs.each(|p| {
            if p.alive {
                live.push(p.pid);
            }
        });
        match live.as_slice() {
            [pid] => Ok(*pid),
            [] => Err(Status::failed_precondition(
                "the hub watches no running program",
            )),
            many => Err(Status::failed_precondition(format!(
                "the hub watches {} programs ({}): name one, as PID@HUB (for example `gyr status {}@HUB`)",
                many.len(),
                many.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                many[0]
            ))),
        }
    }

    /// The client of the program `req` names, and who the caller is.
    fn program<T>(&self, req: &Request<T>) -> Result<(ProgramClient, String), Status> {
        let pid = self.target(req)?;
        let who = format!("{} via hub", access::client_name(req));
        if let Some(c) = self.shared.clients().get(&pid) {
            return Ok((c.clone(), who));
        }
        let known = self.shared.programs.get(pid);
        let known = known.as_deref().map(crate::program::lock);
        Err(match known.as_deref() {
            Some(p) if !p.alive && p.source == crate::program::Source::Replay => {
                Status::failed_precondition(format!(
                    "program {pid} is a recording being replayed: it can be watched, not steered"
                ))
            }
            Some(p) if !p.alive => Status::failed_precondition(format!("program {pid} has ended")),
            Some(_) => Status::unavailable(format!(
                "the hub cannot reach program {pid}'s server to steer it (it pushes its events without a reachable address)"
            )),
            None => Status::not_found(format!(
                "the hub watches no program {pid}; `gyr ps --hub HUB` lists them"
            )),
        })
    }
}

/// Forwards one call to the program the request names: `forward!(self, req, method, steer)`.
macro_rules! forward {
    ($self:ident, $req:ident, $method:ident, $steer:expr) => {{
        if $steer {
            $self.shared.access.steer_permission(&$req)?;
        } else {
            $self.shared.access.permission(&$req)?;
        }
        let (c, who) = $self.program(&$req)?;
        let r = c.req($req.into_inner(), &who);
        c.inner.clone().$method(r).await
    }};
}

#[tonic::async_trait]
impl v1::gyr_server::Gyr for HubService {
    async fn handshake(
        &self,
        req: Request<v1::HandshakeRequest>,
    ) -> Result<Response<v1::HandshakeReply>, Status> {
        let can_steer = self.shared.access.handshake(&req)?;
        // With a program named, the client talks to that program through the hub.
        let (pid, command_line) = match self.named(&req)? {
            Some(pid) => {
                let command_line = self
                    .shared
                    .programs
                    .with(pid, |p| p.command_line.clone())
                    .ok_or_else(|| {
                        Status::not_found(format!(
                            "the hub watches no program {pid}; `gyr ps --hub HUB` lists them"
                        ))
                    })?;
                (pid, command_line)
            }
            None => (std::process::id(), std::env::args().collect()),
        };
        Ok(Response::new(self.shared.access.handshake_reply(
            can_steer,
            pid,
            command_line,
        )))
    }

    async fn list_processes(
        &self,
        req: Request<v1::ListProcessesRequest>,
    ) -> Result<Response<v1::ListProcessesReply>, Status> {
        self.shared.access.permission(&req)?;
        let mut processes = Vec::new();
        self.shared.programs.each(|p| processes.push(p.info()));
        Ok(Response::new(v1::ListProcessesReply { processes }))
    }

    async fn publish(
        &self,
        req: Request<tonic::Streaming<v1::PublishMessage>>,
    ) -> Result<Response<v1::PublishReply>, Status> {
        // Publishing feeds what everyone sees: it takes the steer token.
        self.shared.access.steer_permission(&req)?;
        let received = crate::input::publish(self.shared.clone(), req.into_inner()).await?;
        Ok(Response::new(v1::PublishReply { received }))
    }

    async fn ping(&self, req: Request<v1::PingRequest>) -> Result<Response<v1::PingReply>, Status> {
        self.shared.access.ping(req)
    }

    async fn status(
        &self,
        req: Request<v1::StatusRequest>,
    ) -> Result<Response<v1::StatusReply>, Status> {
        forward!(self, req, status, false)
    }

    async fn list_objects(
        &self,
        req: Request<v1::ListObjectsRequest>,
    ) -> Result<Response<v1::ListObjectsReply>, Status> {
        forward!(self, req, list_objects, false)
    }

    async fn get(&self, req: Request<v1::GetRequest>) -> Result<Response<v1::GetReply>, Status> {
        forward!(self, req, get, false)
    }

    async fn set(&self, req: Request<v1::SetRequest>) -> Result<Response<v1::SetReply>, Status> {
        forward!(self, req, set, true)
    }

    async fn call(&self, req: Request<v1::CallRequest>) -> Result<Response<v1::CallReply>, Status> {
        forward!(self, req, call, true)
    }

    async fn control(
        &self,
        req: Request<v1::ControlRequest>,
    ) -> Result<Response<v1::StatusReply>, Status> {
        forward!(self, req, control, true)
    }

    async fn list_sensors(
        &self,
        req: Request<v1::ListSensorsRequest>,
    ) -> Result<Response<v1::SensorsReply>, Status> {
        forward!(self, req, list_sensors, false)
    }

    async fn sensor_control(
        &self,
        req: Request<v1::SensorControlRequest>,
    ) -> Result<Response<v1::SensorsReply>, Status> {
        forward!(self, req, sensor_control, true)
    }

    type SubscribeStream = BoxStream<v1::EventBatch>;

    async fn subscribe(
        &self,
        req: Request<v1::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        self.shared.access.permission(&req)?;
        let pid = self.named(&req)?;
        let r = req.into_inner();
        let outputs = &self.shared.outputs;
        // Under the program's lock, so that it cannot end between the look and the
        // subscription (its end is marked under the same lock).
        let known = pid.and_then(|pid| {
            self.shared.programs.with(pid, |p| {
                if p.finished() {
                    // Its stream is over: an empty stream that ends at once.
                    gyr_proto::batch_queue::batch_queue(1, 1).1
                } else {
                    outputs.subscribe(Some(p.pid), r.types.clone(), r.threads.clone(), r.decoded)
                }
            })
        });
        let rx = match known {
            Some(rx) => rx,
            None => outputs.subscribe(pid, r.types, r.threads, r.decoded),
        };
        Ok(Response::new(Box::pin(rx)))
    }

    async fn list_rules(
        &self,
        req: Request<v1::ListRulesRequest>,
    ) -> Result<Response<v1::ListRulesReply>, Status> {
        // With a program named (`gyr rules list PID@HUB`): the rules the program runs itself.
        if self.named(&req)?.is_some() {
            return forward!(self, req, list_rules, false);
        }
        self.shared.access.permission(&req)?;
        Ok(Response::new(
            self.shared
                .rules
                .as_ref()
                .map(|r| r.state())
                .unwrap_or_default(),
        ))
    }

    async fn list_alerts(
        &self,
        req: Request<v1::ListAlertsRequest>,
    ) -> Result<Response<v1::ListAlertsReply>, Status> {
        self.shared.access.permission(&req)?;
        let r = req.into_inner();
        let mut alerts = Vec::new();
        self.shared.programs.each(|p| {
            if r.pid == 0 || r.pid == p.pid {
                alerts.extend(p.alerts.iter().map(|a| a.info(p.clock_zero_unix_ns)));
            }
        });
        alerts.sort_by_key(|a| a.unix_ns);
        if r.limit > 0 && alerts.len() > r.limit as usize {
            alerts.drain(..alerts.len() - r.limit as usize);
        }
        Ok(Response::new(v1::ListAlertsReply { alerts }))
    }

    type LogStream = BoxStream<v1::LogEntry>;

    async fn log(&self, req: Request<v1::LogRequest>) -> Result<Response<Self::LogStream>, Status> {
        self.shared.access.permission(&req)?;
        let pid = self.named(&req)?;
        let r = req.into_inner();
        let wanted = move |e: &v1::LogEntry| pid.is_none_or(|p| p == e.pid) && e.seq > r.after;
        // Subscribed before the past is read: an entry arriving meanwhile comes twice at
        // most, never not at all (the client sees its seq again).
        let mut live = self.shared.outputs.log.subscribe();
        let past: Vec<v1::LogEntry> = {
            let mut v: Vec<v1::LogEntry> = Vec::new();
            self.shared
                .programs
                .each(|p| v.extend(p.log_entries.iter().filter(|e| wanted(e)).cloned()));
            v.sort_by_key(|e| e.time_ns);
            v
        };
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        tokio::spawn(async move {
            for e in past {
                if tx.send(Ok(e)).await.is_err() {
                    return;
                }
            }
            if !r.follow {
                return;
            }
            loop {
                match live.recv().await {
                    Ok(e) if wanted(&e) => {
                        if tx.send(Ok(e)).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        let _ = tx
                            .send(Err(Status::data_loss(format!(
                                "this client fell {n} steering-log entries behind; ask again with after = the last seq seen"
                            ))))
                            .await;
                        return;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
