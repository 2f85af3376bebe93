//! Error messages short enough to reach the client. A refusal often echoes what was asked
//! (an attribute's name, a value, a condition), and a gRPC error travels in an HTTP/2 header:
//! past the client's header limit (16 KB by default) the client sees only "h2 protocol error".
//! [`ShortErrors`] wraps a server's service and cuts every error message to
//! [`MAX_ERROR_MESSAGE`] bytes, on a character boundary, saying how much was left out.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::codegen::http;
use tonic::server::NamedService;

/// The longest error message a server sends, in bytes (well under the client's header limit
/// even when every byte is percent-encoded).
pub const MAX_ERROR_MESSAGE: usize = 4096;

/// `message` cut to [`MAX_ERROR_MESSAGE`] bytes with `… (N more bytes)`, or `None` when it fits.
pub fn shorten(message: &str) -> Option<String> {
    if message.len() <= MAX_ERROR_MESSAGE {
        return None;
    }
    let mut end = MAX_ERROR_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    Some(format!(
        "{}… ({} more bytes)",
        &message[..end],
        message.len() - end
    ))
}

/// A service whose error messages are cut to [`MAX_ERROR_MESSAGE`] bytes.
#[derive(Debug, Clone)]
pub struct ShortErrors<S> {
    inner: S,
}

impl<S> ShortErrors<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        ShortErrors { inner }
    }
}

impl<S: NamedService> NamedService for ShortErrors<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B, RB> tower::Service<http::Request<B>> for ShortErrors<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let f = self.inner.call(req);
        Box::pin(async move {
            let mut r = f.await?;
            shorten_header(r.headers_mut());
            Ok(r)
        })
    }
}

/// Cuts the `grpc-message` of a refusal (sent in the headers of a call that fails at once).
fn shorten_header(headers: &mut http::HeaderMap) {
    const GRPC_MESSAGE: &str = "grpc-message";
    // Encoded, a message is at least as long as decoded.
    if headers
        .get(GRPC_MESSAGE)
        .is_none_or(|v| v.len() <= MAX_ERROR_MESSAGE)
    {
        return;
    }
    let Some(status) = tonic::Status::from_header_map(headers) else {
        return;
    };
    let Some(short) = shorten(status.message()) else {
        return;
    };
    let mut fresh = http::HeaderMap::new();
    if tonic::Status::new(status.code(), short)
        .add_header(&mut fresh)
        .is_ok()
        && let Some(m) = fresh.remove(GRPC_MESSAGE)
    {
        headers.insert(GRPC_MESSAGE, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        assert_eq!(shorten("short"), None);
        let long = "é".repeat(MAX_ERROR_MESSAGE);
        let s = shorten(&long).unwrap();
        assert!(s.ends_with(&format!("… ({} more bytes)", MAX_ERROR_MESSAGE)));
        assert!(s.len() < MAX_ERROR_MESSAGE + 40);
    }

    #[test]
    fn a_long_refusal_header_is_cut() {
        let mut h = http::HeaderMap::new();
        tonic::Status::not_found(format!("no attribute `{}`", "x".repeat(20_000)))
            .add_header(&mut h)
            .unwrap();
        shorten_header(&mut h);
        let s = tonic::Status::from_header_map(&h).unwrap();
        assert_eq!(s.code(), tonic::Code::NotFound);
        assert!(s.message().starts_with("no attribute `xxx"));
        assert!(s.message().ends_with("more bytes)"), "{}", s.message());
        assert!(s.message().len() < MAX_ERROR_MESSAGE + 40);
    }
}
