//! `gyr trace export --format otlp`: sends the OTLP batches `gyr_trace::export::otlp` makes
//! to a collector over gRPC (`TraceService/Export`, `LogsService/Export`), one request per
//! batch, waiting for each answer: memory stays one batch, and a collector that pushes back
//! slows the export instead of filling a queue.
//!
//! A collector's refusals are not ignored: an error status ends the export with the status,
//! a transient one (`UNAVAILABLE`, `RESOURCE_EXHAUSTED`) is retried a few times first, and
//! `partial_success` (items the collector rejected while accepting the rest) is counted and
//! reported with its message.
//!
//! `https://` endpoints are reached over TLS (feature `tls`, on by default: rustls), trusting
//! the system's CA certificates or only `--ca-cert`'s; `--header` values (often credentials)
//! go in clear text only to this machine.

use gyr_proto::otlp::collector::logs::v1::ExportLogsServiceRequest;
use gyr_proto::otlp::collector::logs::v1::logs_service_client::LogsServiceClient;
use gyr_proto::otlp::collector::trace::v1::ExportTraceServiceRequest;
use gyr_proto::otlp::collector::trace::v1::trace_service_client::TraceServiceClient;
use gyr_proto::otlp::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value,
};
use gyr_proto::otlp::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use gyr_proto::otlp::resource::v1::Resource;
use gyr_proto::otlp::trace::v1::{ResourceSpans, ScopeSpans, Span, span::SpanKind};
use gyr_trace::export::otlp::{self as conv, AttrValue, OtlpSink};
use std::io;
use std::time::Duration;
use tonic::metadata::{AsciiMetadataKey, AsciiMetadataValue, MetadataMap};
use tonic::transport::{Channel, Endpoint};

/// Retries of a batch the collector could not take for now.
const RETRIES: u32 = 3;
/// The most headers `--header` takes.
pub(crate) const MAX_HEADERS: usize = 32;

/// One `--header KEY=VALUE`: a gRPC metadata entry sent with every request.
#[derive(Clone)]
pub(crate) struct Header {
    key: AsciiMetadataKey,
    value: AsciiMetadataValue,
}

impl std::fmt::Debug for Header {
    /// The value is left out: it is often a secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Header({}=…)", self.key.as_str())
    }
}

impl std::str::FromStr for Header {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let Some((k, v)) = s.split_once('=') else {
            return Err("a header is KEY=VALUE, such as `authorization=Bearer TOKEN`".to_owned());
        };
        let k = k.trim().to_ascii_lowercase();
        let v = v.trim();
        if k.is_empty() || v.is_empty() {
            return Err(format!(
                "the header `{}` has an empty name or value: give KEY=VALUE, both non-empty",
                k
            ));
        }
        if k.ends_with("-bin") {
            return Err(format!(
                "the header `{k}` is binary metadata (`-bin`): give a text header"
            ));
        }
        let key = AsciiMetadataKey::from_bytes(k.as_bytes()).map_err(|_| {
            format!("`{k}` is not a valid header name: use letters, digits, `-`, `_` and `.`")
        })?;
        // The value is not echoed: it is often a secret.
        let printable = v.bytes().all(|b| (0x20..0x7f).contains(&b));
        let value = AsciiMetadataValue::try_from(v)
            .ok()
            .filter(|_| printable)
            .ok_or_else(|| {
                format!("the value of the header `{k}` must be printable ASCII (its text was not)")
            })?;
        Ok(Header { key, value })
    }
}

/// Where and how to send.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) endpoint: String,
    pub(crate) headers: Vec<Header>,
    pub(crate) timeout: Duration,
    /// The CA certificate(s), PEM, that an `https://` collector's certificate must chain to,
    /// instead of the system's.
    pub(crate) ca_cert: Option<std::path::PathBuf>,
}

/// What the collector said, beyond accepting everything.
#[derive(Debug, Default)]
pub(crate) struct Sent {
    pub(crate) requests: u64,
    pub(crate) retries: u64,
    pub(crate) rejected_spans: i64,
    pub(crate) rejected_logs: i64,
    /// The collector's messages (partial success), the first few.
    pub(crate) messages: Vec<String>,
}

/// The gRPC sender: a sink of the conversion.
#[derive(Debug)]
pub(crate) struct GrpcSink {
    runtime: tokio::runtime::Runtime,
    traces: TraceServiceClient<Channel>,
    logs: LogsServiceClient<Channel>,
    target: Target,
    pub(crate) sent: Sent,
}

/// Whether `host` (of a URL) is this machine.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl GrpcSink {
    /// Checks `target` and connects to its collector.
    pub(crate) fn connect(target: Target) -> anyhow::Result<GrpcSink> {
        let uri: tonic::transport::Uri = target.endpoint.parse().map_err(|e| {
            anyhow::anyhow!(
                "`{}` is not a URL ({e}): give the collector's OTLP/gRPC endpoint, such as http://127.0.0.1:4317",
                target.endpoint
            )
        })?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => anyhow::bail!(
                "`{}` has no http:// or https:// scheme: give the collector's OTLP/gRPC endpoint, such as http://127.0.0.1:4317",
                target.endpoint
            ),
        };
        let host = uri.host().unwrap_or_default();
        if !tls && !target.headers.is_empty() && !is_loopback(host) {
            anyhow::bail!(
                "refusing to send --header values (often credentials) in clear text to {host}: they would be readable on the network; use https://{host}:PORT (TLS), or a collector on this machine (http://127.0.0.1:4317) that forwards them over TLS"
            );
        }
        if !tls && target.ca_cert.is_some() {
            anyhow::bail!(
                "--ca-cert is for an https:// endpoint: {} is plain HTTP/2",
                target.endpoint
            );
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let mut endpoint = Endpoint::from_shared(target.endpoint.clone())?
            .connect_timeout(target.timeout)
            .timeout(target.timeout);
        if tls {
            endpoint = with_tls(endpoint, &target)?;
        }
        let channel = runtime
            .block_on(endpoint.connect())
            .map_err(|e| {
                let text = source_text(&e);
                let hint = if text.contains("certificate") {
                    "its certificate is not one this gyr trusts: give the CA that signed it with --ca-cert FILE (PEM)"
                } else {
                    "is it running, with an OTLP/gRPC receiver on that port? its default is 4317"
                };
                anyhow::anyhow!(
                    "cannot reach the OpenTelemetry collector at {}: {text} ({hint})",
                    target.endpoint,
                )
            })?;
        Ok(GrpcSink {
            runtime,
            traces: TraceServiceClient::new(channel.clone()),
            logs: LogsServiceClient::new(channel),
            target,
            sent: Sent::default(),
        })
    }

    fn metadata(&self) -> MetadataMap {
        let mut m = MetadataMap::new();
        for h in &self.target.headers {
            m.append(h.key.clone(), h.value.clone());
        }
        m
    }

    fn note(&mut self, message: &str) {
        if !message.is_empty() && self.sent.messages.len() < 8 {
            self.sent.messages.push(message.to_owned());
        }
    }
}

/// The endpoint over TLS: its certificate checked against `--ca-cert` or the system's CAs.
#[cfg(feature = "tls")]
fn with_tls(endpoint: Endpoint, target: &Target) -> anyhow::Result<Endpoint> {
    use tonic::transport::{Certificate, ClientTlsConfig};
    let config = match &target.ca_cert {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| {
                anyhow::anyhow!(
                    "cannot read --ca-cert {}: {e}: give the PEM file of the CA that signed the collector's certificate",
                    path.display()
                )
            })?;
            // rustls skips what it cannot parse: a file that is no certificate would only
            // show as an unknown issuer at the handshake, far from its cause.
            if pem.len() > 1 << 20
                || !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----")
            {
                anyhow::bail!(
                    "--ca-cert {} holds no PEM certificate (no `-----BEGIN CERTIFICATE-----` in its first MiB): give the CA's certificate in PEM",
                    path.display()
                );
            }
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem))
        }
        None => ClientTlsConfig::new().with_native_roots(),
    };
    endpoint.tls_config(config).map_err(|e| {
        anyhow::anyhow!(
            "cannot set up TLS for {}: {} (with no --ca-cert the system's CA certificates are used: install them, such as Debian's ca-certificates, or give --ca-cert FILE)",
            target.endpoint,
            source_text(&e)
        )
    })
}

#[cfg(not(feature = "tls"))]
fn with_tls(_: Endpoint, target: &Target) -> anyhow::Result<Endpoint> {
    anyhow::bail!(
        "this gyr was built without TLS (cargo feature `tls`), so it cannot reach {}: build gyr with its default features, send to a collector on this machine (http://127.0.0.1:4317) that forwards over TLS, or write --format otlp-json",
        target.endpoint
    )
}

/// An error and its causes, on one line.
fn source_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The collector's refusal as the error that ends the export.
fn refused(endpoint: &str, what: &str, s: &tonic::Status) -> io::Error {
    let hint = match s.code() {
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
            " (check the credentials given with --header)"
        }
        tonic::Code::Unimplemented => {
            " (is this an OTLP/gRPC endpoint? a collector's default is port 4317; 4318 is OTLP/HTTP)"
        }
        tonic::Code::DeadlineExceeded => " (raise --timeout, or lower --batch)",
        tonic::Code::ResourceExhausted => " (lower --batch)",
        _ => "",
    };
    io::Error::other(format!(
        "the collector at {endpoint} refused {what}: {:?}: {}{hint}",
        s.code(),
        s.message()
    ))
}

fn transient(s: &tonic::Status) -> bool {
    matches!(
        s.code(),
        tonic::Code::Unavailable | tonic::Code::ResourceExhausted
    )
}

fn any_value(v: &AttrValue) -> AnyValue {
    use any_value::Value as V;
    AnyValue {
        value: Some(match v {
            AttrValue::Int(i) => V::IntValue(*i),
            AttrValue::Double(f) => V::DoubleValue(*f),
            AttrValue::Bool(b) => V::BoolValue(*b),
            AttrValue::Str(s) => V::StringValue(s.clone()),
            AttrValue::Bytes(b) => V::BytesValue(b.clone()),
            AttrValue::Array(a) => V::ArrayValue(ArrayValue {
                values: a.iter().map(any_value).collect(),
            }),
        }),
    }
}

fn key_values(attrs: &[conv::Attr]) -> Vec<KeyValue> {
    attrs
        .iter()
        .map(|(k, v)| KeyValue {
            key: k.clone(),
            value: Some(any_value(v)),
            ..Default::default()
        })
        .collect()
}

fn resource(r: &conv::Resource) -> Option<Resource> {
    Some(Resource {
        attributes: key_values(&r.attributes),
        ..Default::default()
    })
}

fn scope() -> Option<InstrumentationScope> {
    Some(InstrumentationScope {
        name: conv::SCOPE_NAME.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..Default::default()
    })
}

/// The spans of one batch as a request.
pub(crate) fn trace_request(r: &conv::Resource, spans: &[conv::Span]) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: resource(r),
            scope_spans: vec![ScopeSpans {
                scope: scope(),
                spans: spans
                    .iter()
                    .map(|s| Span {
                        trace_id: s.trace_id.to_vec(),
                        span_id: s.span_id.to_vec(),
                        parent_span_id: s.parent_span_id.map_or_else(Vec::new, |p| p.to_vec()),
                        name: s.name.clone(),
                        kind: SpanKind::Internal as i32,
                        start_time_unix_nano: s.start_unix_ns,
                        end_time_unix_nano: s.end_unix_ns,
                        attributes: key_values(&s.attributes),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// The log records of one batch as a request.
pub(crate) fn logs_request(
    r: &conv::Resource,
    logs: &[conv::LogRecord],
) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: resource(r),
            scope_logs: vec![ScopeLogs {
                scope: scope(),
                log_records: logs
                    .iter()
                    .map(|l| LogRecord {
                        time_unix_nano: l.time_unix_ns,
                        observed_time_unix_nano: l.time_unix_ns,
                        severity_number: l.severity_number,
                        severity_text: l.severity_text.to_owned(),
                        body: Some(any_value(&AttrValue::Str(l.event_name.clone()))),
                        event_name: l.event_name.clone(),
                        attributes: key_values(&l.attributes),
                        trace_id: l.span_id.map_or_else(Vec::new, |_| l.trace_id.to_vec()),
                        span_id: l.span_id.map_or_else(Vec::new, |s| s.to_vec()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

impl GrpcSink {
    /// Makes `call` (one export request), again after a transient refusal, at most `RETRIES`
    /// times with a growing pause; `what` names the records in the error.
    fn with_retries<T>(
        &mut self,
        what: &str,
        mut call: impl FnMut(&mut Self) -> Result<T, tonic::Status>,
    ) -> io::Result<T> {
        let mut attempt = 0;
        loop {
            self.sent.requests += 1;
            match call(self) {
                Ok(answer) => return Ok(answer),
                Err(s) if transient(&s) && attempt < RETRIES => {
                    attempt += 1;
                    self.sent.retries += 1;
                    std::thread::sleep(Duration::from_millis(250 << attempt));
                }
                Err(s) => return Err(refused(&self.target.endpoint, what, &s)),
            }
        }
    }
}

impl OtlpSink for GrpcSink {
    fn spans(&mut self, resource: &conv::Resource, spans: &[conv::Span]) -> io::Result<()> {
        let request = trace_request(resource, spans);
        let answer = self.with_retries("spans", |s| {
            let mut req = tonic::Request::new(request.clone());
            *req.metadata_mut() = s.metadata();
            let mut client = s.traces.clone();
            s.runtime.block_on(client.export(req))
        })?;
        if let Some(p) = answer.into_inner().partial_success {
            self.sent.rejected_spans += p.rejected_spans;
            self.note(&p.error_message);
        }
        Ok(())
    }

    fn logs(&mut self, resource: &conv::Resource, logs: &[conv::LogRecord]) -> io::Result<()> {
        let request = logs_request(resource, logs);
        let answer = self.with_retries("log records", |s| {
            let mut req = tonic::Request::new(request.clone());
            *req.metadata_mut() = s.metadata();
            let mut client = s.logs.clone();
            s.runtime.block_on(client.export(req))
        })?;
        if let Some(p) = answer.into_inner().partial_success {
            self.sent.rejected_logs += p.rejected_log_records;
            self.note(&p.error_message);
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_checked() {
        let h: Header = "Authorization=Bearer abc".parse().unwrap();
        assert_eq!(h.key.as_str(), "authorization");
        assert_eq!(h.value.to_str().unwrap(), "Bearer abc");
        assert!(
            "novalue"
                .parse::<Header>()
                .unwrap_err()
                .contains("KEY=VALUE")
        );
        assert!(
            "authorization="
                .parse::<Header>()
                .unwrap_err()
                .contains("empty")
        );
        assert!("=x".parse::<Header>().unwrap_err().contains("empty"));
        assert!(
            "a b=x"
                .parse::<Header>()
                .unwrap_err()
                .contains("not a valid")
        );
        let e = "x=caf\u{e9}".parse::<Header>().unwrap_err();
        assert!(e.contains("printable ASCII") && !e.contains("caf"));
        assert!("k-bin=x".parse::<Header>().unwrap_err().contains("binary"));
        assert!(!format!("{h:?}").contains("abc"), "the value is not shown");
    }

    #[test]
    fn loopback_hosts() {
        assert!(is_loopback("localhost"));
        assert!(is_loopback("127.0.0.1"));
        assert!(is_loopback("[::1]"));
        assert!(!is_loopback("collector.example.net"));
        assert!(!is_loopback("10.0.0.1"));
    }

    #[test]
    fn endpoints_are_checked_before_connecting() {
        let target = |e: &str, headers: Vec<Header>| Target {
            endpoint: e.into(),
            headers,
            timeout: Duration::from_secs(1),
            ca_cert: None,
        };
        let err = |t| GrpcSink::connect(t).unwrap_err().to_string();
        assert!(err(target("127.0.0.1:4317", vec![])).contains("http://"));
        let plain_ca = Target {
            ca_cert: Some("ca.pem".into()),
            ..target("http://127.0.0.1:4317", vec![])
        };
        assert!(err(plain_ca).contains("https://"));
        let dir = tempfile::tempdir().unwrap();
        let not_pem = dir.path().join("ca.pem");
        std::fs::write(&not_pem, "not a certificate").unwrap();
        let bad_ca = Target {
            ca_cert: Some(not_pem),
            ..target("https://127.0.0.1:4317", vec![])
        };
        let said = err(bad_ca);
        if cfg!(feature = "tls") {
            assert!(said.contains("no PEM certificate"), "{said}");
        } else {
            assert!(said.contains("without TLS"), "{said}");
        }
        let auth: Header = "authorization=Bearer t".parse().unwrap();
        assert!(err(target("http://10.1.2.3:4317", vec![auth])).contains("clear text"));
    }
}
