//! Connecting to a running program's steering server: by pid through its Unix socket, or by
//! `host:port` over TCP with a token.

use crate::Failure;
use gyr::server::{CLIENT_HEADER, discovery};
use gyr_proto::v1::gyr_client::GyrClient;
use hyper_util::rt::TokioIo;
use tonic::Request;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint, Uri};

/// A connected client; every request carries the client's name and token.
pub(crate) struct Client {
    pub(crate) inner: GyrClient<Channel>,
    token: Option<String>,
}

/// Runs a future on a small single-threaded runtime.
pub(crate) fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::from(anyhow::anyhow!("cannot start the async runtime: {e}")))?;
    Ok(rt.block_on(f))
}

impl Client {
    /// Connects to `target`: a pid, or `host:port`.
    pub(crate) async fn connect(target: &str, token: Option<String>) -> Result<Client, Failure> {
        if let Ok(pid) = target.parse::<u32>() {
            let Some(a) = discovery::discover().into_iter().find(|a| a.pid == pid) else {
                let running: Vec<String> = discovery::discover()
                    .iter()
                    .map(|a| a.pid.to_string())
                    .collect();
                return Err(Failure::input(anyhow::anyhow!(
                    "no gyr program with pid {pid} is running{}; `gyr ps` lists them",
                    if running.is_empty() {
                        String::new()
                    } else {
                        format!(" (running: {})", running.join(", "))
                    }
                )));
            };
            let path = a.socket.clone();
            let channel = Endpoint::try_from("http://localhost")
                .map_err(|e| Failure::from(anyhow::anyhow!("{e}")))?
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        Ok::<_, std::io::Error>(TokioIo::new(
                            tokio::net::UnixStream::connect(path).await?,
                        ))
                    }
                }))
                .await
                .map_err(|e| {
                    Failure::input(anyhow::anyhow!(
                        "cannot connect to program {pid} at {}: {e}",
                        a.socket.display()
                    ))
                })?;
            return Ok(Client {
                inner: GyrClient::new(channel),
                token,
            });
        }
        if !target.contains(':') {
            return Err(Failure::input(anyhow::anyhow!(
                "`{target}` is neither a pid nor a host:port address"
            )));
        }
        let token = token.or_else(|| std::env::var("GYR_TOKEN").ok());
        let channel = Endpoint::from_shared(format!("http://{target}"))
            .map_err(|e| Failure::input(anyhow::anyhow!("`{target}` is not an address: {e}")))?
            .connect()
            .await
            .map_err(|e| Failure::input(anyhow::anyhow!("cannot connect to {target}: {e}")))?;
        Ok(Client {
            inner: GyrClient::new(channel),
            token,
        })
    }

    /// Wraps a message with the client's name and token.
    pub(crate) fn req<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        r.metadata_mut()
            .insert(CLIENT_HEADER, MetadataValue::from_static("gyr-cli"));
        if let Some(t) = &self.token
            && let Ok(v) = format!("Bearer {t}").parse()
        {
            r.metadata_mut().insert("authorization", v);
        }
        r
    }
}

/// Turns a server's refusal into the user's error (exit code 2: what was asked for was wrong).
pub(crate) fn refused(target: &str, s: tonic::Status) -> Failure {
    use tonic::Code;
    match s.code() {
        Code::Unavailable | Code::Unknown
            if s.message().contains("transport") || s.message().contains("connect") =>
        {
            Failure::from(anyhow::anyhow!(
                "program {target} went away: {}",
                s.message()
            ))
        }
        _ => Failure::input(anyhow::anyhow!("{}", s.message())),
    }
}
