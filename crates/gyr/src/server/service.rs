//! The `gyr.v1.Gyr` service of an application's embedded server: each call maps onto the
//! steering and control APIs of this crate.

use super::stream::Fanout;
use crate::control::{self, Rate, Target};
use crate::steer::{self, AttrType, ScalarKind, SteerError, Who};
use gyr_client::access::{self, Access};
use gyr_core::Value;
use gyr_proto::short_errors::ShortErrors;
use gyr_proto::v1::gyr_server::GyrServer;
use gyr_proto::{Incoming, v1};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// What the service needs from the runtime.
pub(crate) struct ServiceContext {
    pub(crate) pid: u32,
    pub(crate) command_line: Vec<String>,
    pub(crate) started_unix_ns: u64,
    pub(crate) counters: Box<dyn Fn() -> (u64, u64) + Send + Sync>,
    pub(crate) fanout: Fanout,
}

#[derive(Clone)]
pub(crate) struct GyrService {
    pub(crate) ctx: Arc<ServiceContext>,
    /// The Unix socket's is open, the TCP listener's asks for a token.
    pub(crate) access: Access,
}

impl GyrService {
    /// Who steers with `req` (refused unless it may), as the steering log names it.
    fn steerer<T>(&self, req: &Request<T>) -> Result<Who, Status> {
        self.access.steer_permission(req)?;
        let via = if self.access.guarded() {
            "tcp"
        } else {
            "unix socket"
        };
        Ok(Who::new(format!("{} ({via})", access::client_name(req))))
    }
}

/// The service as served: every refusal's message cut to a length any client can receive.
pub(crate) fn server(svc: GyrService) -> ShortErrors<GyrServer<GyrService>> {
    ShortErrors::new(GyrServer::new(svc))
}

fn status(e: SteerError) -> Status {
    let msg = e.to_string();
    match e {
        SteerError::UnknownObject { .. }
        | SteerError::UnknownAttribute { .. }
        | SteerError::UnknownOperation { .. } => Status::not_found(msg),
        SteerError::PreconditionFailed { .. }
        | SteerError::PostconditionFailed { .. }
        | SteerError::Busy { .. } => Status::failed_precondition(msg),
        SteerError::NoSynchPoint { .. } => Status::deadline_exceeded(msg),
        SteerError::ActuatorFailed { .. } => Status::aborted(msg),
        _ => Status::invalid_argument(msg),
    }
}

fn wire_type(t: AttrType) -> i32 {
    use v1::AttrType as W;
    (match t {
        AttrType::Int => W::Int,
        AttrType::UInt => W::Uint,
        AttrType::Float => W::Float,
        AttrType::Bool => W::Bool,
        AttrType::Str => W::Str,
        AttrType::List(ScalarKind::Int) => W::IntList,
        AttrType::List(ScalarKind::UInt) => W::UintList,
        AttrType::List(ScalarKind::Float) => W::FloatList,
        AttrType::List(_) => W::BoolList,
    }) as i32
}

fn run_state(s: &steer::RunState) -> v1::RunState {
    use steer::RunState as S;
    use v1::run_state::Kind;
    let (kind, at, count, condition) = match s {
        S::Running => (Kind::Running, String::new(), 0, String::new()),
        S::PauseRequested => (Kind::PauseRequested, String::new(), 0, String::new()),
        S::Paused { at, count } => (Kind::Paused, at.clone(), *count, String::new()),
        S::Stepping { left } => (Kind::Stepping, String::new(), *left, String::new()),
        S::RunningUntil { condition } => (Kind::RunningUntil, String::new(), 0, condition.clone()),
    };
    v1::RunState {
        kind: kind as i32,
        at,
        count,
        condition,
        text: s.to_string(),
    }
}

fn resolve(path: &str, v: &v1::Value) -> Result<Value, Status> {
    match v.incoming() {
        Some(Incoming::Value(v)) => Ok(v),
        Some(Incoming::Text(t)) => steer::parse_value(path, &t).map_err(status),
        None => Err(Status::invalid_argument(format!(
            "the value for `{path}` is empty"
        ))),
    }
}

fn param_types(target: &str) -> Option<Vec<AttrType>> {
    if let Some((o, a)) = target.split_once('.') {
        let obj = steer::objects().into_iter().find(|x| x.name == o)?;
        let act = obj.actuators.into_iter().find(|x| x.name == a)?;
        return Some(act.params.into_iter().map(|p| p.ty).collect());
    }
    let f = steer::functions().into_iter().find(|f| f.name == target)?;
    Some(f.params.into_iter().map(|p| p.ty).collect())
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl GyrService {
    fn status_reply(&self) -> v1::StatusReply {
        let (records, lost) = (self.ctx.counters)();
        v1::StatusReply {
            state: Some(run_state(&steer::state())),
            pid: self.ctx.pid,
            command_line: self.ctx.command_line.clone(),
            synch_points: steer::synch_point_counts().into_iter().collect(),
            records,
            lost,
        }
    }
}

fn sensors_reply() -> v1::SensorsReply {
    v1::SensorsReply {
        sensors: control::sensors()
            .into_iter()
            .map(|s| v1::SensorInfo {
                type_name: s.type_name,
                instance: s.instance.unwrap_or_default(),
                kind: s.kind.to_owned(),
                active: s.active,
                enabled: s.enabled,
                rate: s.rate.to_string(),
                skipped: s.skipped,
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl v1::gyr_server::Gyr for GyrService {
    async fn handshake(
        &self,
        req: Request<v1::HandshakeRequest>,
    ) -> Result<Response<v1::HandshakeReply>, Status> {
        let can_steer = self.access.handshake(&req)?;
        Ok(Response::new(self.access.handshake_reply(
            can_steer,
            self.ctx.pid,
            self.ctx.command_line.clone(),
        )))
    }

    async fn list_processes(
        &self,
        req: Request<v1::ListProcessesRequest>,
    ) -> Result<Response<v1::ListProcessesReply>, Status> {
        self.access.permission(&req)?;
        let (events, lost) = (self.ctx.counters)();
        Ok(Response::new(v1::ListProcessesReply {
            processes: vec![v1::ProcessInfo {
                pid: self.ctx.pid,
                command_line: self.ctx.command_line.clone(),
                alive: true,
                started_unix_ns: self.ctx.started_unix_ns,
                events,
                lost,
                source: "self".into(),
            }],
        }))
    }

    async fn publish(
        &self,
        _req: Request<tonic::Streaming<v1::PublishMessage>>,
    ) -> Result<Response<v1::PublishReply>, Status> {
        Err(Status::unimplemented(
            "this is a program's own server, not a hub: publish to `gyr hub` (GYR_HUB=host:port)",
        ))
    }

    async fn ping(&self, req: Request<v1::PingRequest>) -> Result<Response<v1::PingReply>, Status> {
        self.access.ping(req)
    }

    async fn status(
        &self,
        req: Request<v1::StatusRequest>,
    ) -> Result<Response<v1::StatusReply>, Status> {
        self.access.permission(&req)?;
        Ok(Response::new(self.status_reply()))
    }

    async fn list_objects(
        &self,
        req: Request<v1::ListObjectsRequest>,
    ) -> Result<Response<v1::ListObjectsReply>, Status> {
        self.access.permission(&req)?;
        let op = |o: steer::OperationInfo| v1::OperationInfo {
            name: o.name,
            params: o
                .params
                .into_iter()
                .map(|p| v1::ParamInfo {
                    name: p.name,
                    r#type: wire_type(p.ty),
                })
                .collect(),
            description: o.description.unwrap_or_default(),
        };
        let objects = steer::objects()
            .into_iter()
            .map(|o| {
                let values = steer::get_all(&o.name).unwrap_or_default();
                v1::ObjectInfo {
                    attributes: o
                        .attributes
                        .into_iter()
                        .map(|a| v1::AttrInfo {
                            value: values
                                .iter()
                                .find(|(n, _)| *n == a.name)
                                .map(|(_, v)| v1::Value::from(v)),
                            r#type: wire_type(a.ty),
                            unit: a.unit.unwrap_or_default(),
                            has_min: a.min.is_some(),
                            min: a.min.unwrap_or(0.0),
                            has_max: a.max.is_some(),
                            max: a.max.unwrap_or(0.0),
                            read_only: a.read_only,
                            description: a.description.unwrap_or_default(),
                            name: a.name,
                        })
                        .collect(),
                    actuators: o.actuators.into_iter().map(op).collect(),
                    is_param: o.kind == steer::ObjectKind::Param,
                    description: o.description.unwrap_or_default(),
                    version: o.version,
                    name: o.name,
                }
            })
            .collect();
        Ok(Response::new(v1::ListObjectsReply {
            objects,
            functions: steer::functions().into_iter().map(op).collect(),
        }))
    }

    async fn get(&self, req: Request<v1::GetRequest>) -> Result<Response<v1::GetReply>, Status> {
        self.access.permission(&req)?;
        if req.get_ref().paths.is_empty() {
            return Err(Status::invalid_argument(
                "name at least one attribute to read (`object.attribute`, or `object` for all)",
            ));
        }
        let mut values = Vec::new();
        for path in &req.get_ref().paths {
            let is_object = !path.contains('.')
                && steer::objects()
                    .iter()
                    .any(|o| o.name == *path && o.kind == steer::ObjectKind::Object);
            if is_object {
                for (a, v) in steer::get_all(path).map_err(status)? {
                    values.push(v1::PathValue {
                        path: format!("{path}.{a}"),
                        value: Some(v.into()),
                    });
                }
            } else {
                let v = steer::get(path).map_err(status)?;
                values.push(v1::PathValue {
                    path: path.clone(),
                    value: Some(v.into()),
                });
            }
        }
        Ok(Response::new(v1::GetReply { values }))
    }

    async fn set(&self, req: Request<v1::SetRequest>) -> Result<Response<v1::SetReply>, Status> {
        let who = self.steerer(&req)?;
        if req.get_ref().writes.is_empty() {
            return Err(Status::invalid_argument(
                "name at least one attribute to write, with its value",
            ));
        }
        let mut writes = Vec::new();
        for w in &req.get_ref().writes {
            let v = w
                .value
                .as_ref()
                .ok_or_else(|| Status::invalid_argument(format!("no value for `{}`", w.path)))?;
            writes.push((w.path.clone(), resolve(&w.path, v)?));
        }
        let done = steer::set_many(&writes, &who).map_err(status)?;
        Ok(Response::new(v1::SetReply {
            changes: done
                .into_iter()
                .map(|(path, old, new)| v1::Change {
                    path,
                    old: Some(old.into()),
                    new: Some(new.into()),
                })
                .collect(),
        }))
    }

    async fn call(&self, req: Request<v1::CallRequest>) -> Result<Response<v1::CallReply>, Status> {
        let who = self.steerer(&req)?;
        let r = req.into_inner();
        let types = param_types(&r.target);
        let mut args = Vec::new();
        for (i, a) in r.args.iter().enumerate() {
            args.push(
                match (a.incoming(), types.as_ref().and_then(|t| t.get(i))) {
                    (Some(Incoming::Value(v)), _) => v,
                    (Some(Incoming::Text(t)), Some(ty)) => ty.parse(&t).map_err(|e| {
                        Status::invalid_argument(format!(
                            "bad arguments for `{}`: argument {}: {e}",
                            r.target,
                            i + 1
                        ))
                    })?,
                    (Some(Incoming::Text(t)), None) => Value::Str(t),
                    (None, _) => {
                        return Err(Status::invalid_argument(format!(
                            "argument {} is empty",
                            i + 1
                        )));
                    }
                },
            );
        }
        let timeout = Duration::from_millis(if r.timeout_ms == 0 {
            5000
        } else {
            r.timeout_ms as u64
        });
        let is_function = steer::functions().iter().any(|f| f.name == r.target);
        let target = r.target.clone();
        let result = tokio::task::spawn_blocking(move || {
            if is_function {
                steer::call(&target, &args, &who)
            } else {
                steer::actuate(&target, &args, &who).and_then(|p| p.wait(timeout))
            }
        })
        .await
        .map_err(|e| Status::internal(format!("the call did not complete: {e}")))?
        .map_err(status)?;
        Ok(Response::new(v1::CallReply {
            result: Some(result.into()),
        }))
    }

    async fn control(
        &self,
        req: Request<v1::ControlRequest>,
    ) -> Result<Response<v1::StatusReply>, Status> {
        let who = self.steerer(&req)?;
        let r = req.get_ref();
        match v1::control_request::Action::try_from(r.action) {
            Ok(v1::control_request::Action::Pause) => steer::pause(&who),
            Ok(v1::control_request::Action::Resume) => steer::resume(&who),
            Ok(v1::control_request::Action::Step) if r.steps == 0 => {
                return Err(Status::invalid_argument(
                    "step needs a number of synch points of 1 or more",
                ));
            }
            Ok(v1::control_request::Action::Step) => steer::step(r.steps, &who),
            Ok(v1::control_request::Action::RunUntil) => {
                steer::run_until_condition(&r.until, &who).map_err(status)?
            }
            _ => {
                return Err(Status::invalid_argument(
                    "control action must be pause, resume, step or run-until",
                ));
            }
        }
        Ok(Response::new(self.status_reply()))
    }

    async fn list_sensors(
        &self,
        req: Request<v1::ListSensorsRequest>,
    ) -> Result<Response<v1::SensorsReply>, Status> {
        self.access.permission(&req)?;
        Ok(Response::new(sensors_reply()))
    }

    async fn sensor_control(
        &self,
        req: Request<v1::SensorControlRequest>,
    ) -> Result<Response<v1::SensorsReply>, Status> {
        let who = self.steerer(&req)?;
        let r = req.into_inner();
        use v1::sensor_control_request::Scope;
        let target = match Scope::try_from(r.scope) {
            Ok(Scope::Global) => Target::Global,
            Ok(Scope::Type) => Target::Type(r.name.clone()),
            Ok(Scope::Instance) => Target::Instance(r.name.clone()),
            _ => {
                return Err(Status::invalid_argument(
                    "sensor control needs a scope: global, type or instance",
                ));
            }
        };
        let rate = match (r.every_nth, r.per_second) {
            (Some(1), _) => Some(Rate::All),
            (Some(n), _) => Some(Rate::EveryNth(n)),
            (None, Some(p)) => Some(Rate::PerSecond(p)),
            (None, None) => None,
        };
        control::check_change(&target, r.enabled, rate).map_err(|e| match e {
            control::ControlError::UnknownType { .. }
            | control::ControlError::UnknownInstance { .. } => Status::not_found(e.to_string()),
            _ => Status::invalid_argument(e.to_string()),
        })?;
        let mut changes = Vec::new();
        if let Some(on) = r.enabled {
            control::set_enabled(&target, on);
            changes.push(if on { "on" } else { "off" }.to_owned());
        }
        if let Some(rate) = rate {
            control::set_rate(&target, rate)
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            changes.push(format!("rate {rate}"));
        }
        steer::log::record_sensor_change(&who, &format!("{target}: {}", changes.join(", ")));
        Ok(Response::new(sensors_reply()))
    }

    type SubscribeStream = BoxStream<v1::EventBatch>;

    async fn subscribe(
        &self,
        req: Request<v1::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        self.access.permission(&req)?;
        let r = req.into_inner();
        let rx = self.ctx.fanout.subscribe(r.types, r.threads, r.decoded);
        Ok(Response::new(Box::pin(rx)))
    }

    async fn list_rules(
        &self,
        req: Request<v1::ListRulesRequest>,
    ) -> Result<Response<v1::ListRulesReply>, Status> {
        self.access.permission(&req)?;
        let pid = std::process::id();
        let mut reply = v1::ListRulesReply {
            origin: "the program's event/action repository".into(),
            // Watched events the steering thread's queue had no room for.
            events_missed: steer::repository::missed(),
            ..Default::default()
        };
        reply.rules = steer::repository::rules()
            .into_iter()
            .map(|r| v1::RuleInfo {
                name: r.name,
                on: r.event_type,
                fired: r.fired,
                last_fired_unix_ns: r.last_fired_unix_ns,
                last_pid: if r.fired > 0 { pid } else { 0 },
                errors: r.failed,
                last_error: r.last_error.unwrap_or_default(),
                ..Default::default()
            })
            .collect();
        #[cfg(feature = "rules")]
        if let Some(file) = steer::repository::rules_file() {
            reply.origin = file.origin;
            reply.load_error = file.load_error.unwrap_or_default();
            reply.loaded_unix_ns = file.loaded_unix_ns;
            reply
                .rules
                .extend(file.rules.into_iter().map(|r| v1::RuleInfo {
                    name: r.name,
                    on: r.on.unwrap_or_default(),
                    when: r.when,
                    fired: r.fired,
                    last_fired_unix_ns: r.last_fired_unix_ns,
                    last_pid: if r.fired > 0 { pid } else { 0 },
                    errors: r.errors,
                    last_error: r.last_error.unwrap_or_default(),
                }));
        }
        Ok(Response::new(reply))
    }

    async fn list_alerts(
        &self,
        req: Request<v1::ListAlertsRequest>,
    ) -> Result<Response<v1::ListAlertsReply>, Status> {
        self.access.permission(&req)?;
        Err(Status::failed_precondition(
            "a program keeps no alerts: its `gyr.alert` events are in its stream \
             (`gyr watch PID gyr.alert`); a hub keeps every program's (`gyr alerts --hub ADDR`)",
        ))
    }

    type LogStream = BoxStream<v1::LogEntry>;

    async fn log(&self, req: Request<v1::LogRequest>) -> Result<Response<Self::LogStream>, Status> {
        self.access.permission(&req)?;
        let r = req.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        tokio::spawn(async move {
            let mut after = r.after;
            loop {
                for e in steer::log::entries(after) {
                    after = e.seq;
                    let entry = v1::LogEntry {
                        seq: e.seq,
                        time_ns: e.time_ns,
                        who: e.who,
                        action: e.action.to_string(),
                        error: e.result.err().unwrap_or_default(),
                        pid: 0,
                    };
                    if tx.send(Ok(entry)).await.is_err() {
                        return;
                    }
                }
                if !r.follow || tx.is_closed() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
