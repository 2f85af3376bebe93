//! Opening a channel to a `Gyr` server: over a Unix socket (a program on this machine, found by
//! its announcement) or TCP. Every client (the CLI, the hub, the benchmarks, a program's hub
//! publisher) connects through here.

use hyper_util::rt::TokioIo;
use std::path::PathBuf;
use tonic::transport::{Channel, Endpoint, Error, Uri};

/// A channel to the server listening on the Unix socket at `path`.
pub async fn unix(path: impl Into<PathBuf>) -> Result<Channel, Error> {
    let path = path.into();
    // The URI is required by the API but unused: the connector below ignores it.
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        }))
        .await
}

/// A channel to the server at `host:port` over TCP (plain HTTP/2: for loopback and tunnels).
pub async fn tcp(address: &str) -> Result<Channel, Error> {
    Endpoint::from_shared(format!("http://{address}"))?
        .connect()
        .await
}
