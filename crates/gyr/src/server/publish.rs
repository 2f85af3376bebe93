//! Pushing the program's event stream to a hub (`GYR_HUB=host:port`): the program connects to
//! the hub, introduces itself (pid, command line, where its own server listens, so the hub can
//! steer it), then sends every batch a subscriber with no filter would get.
//!
//! The push is one more subscriber of the fan-out, so it has the same guarantee: a slow or
//! absent hub never slows the program; batches it could not take are counted and the count
//! travels to the hub. A hub that is not there yet, or goes away, is retried every second;
//! what the program emitted while a hub it had reached was away is counted too, and the count
//! is the first batch the hub gets when it is back.
//!
//! The push subscribes when the runtime starts, before the program's first event, so the hub
//! sees the program from its beginning (an alert raised at start-up included), not from when
//! the first connection happened to be made. Until then its queue holds what a subscriber's
//! does (`DEFAULT_SUBSCRIBER_QUEUE` batches, at most `DEFAULT_SUBSCRIBER_QUEUE_BYTES`); what
//! does not fit is counted and the count reaches the hub with the queued batches.

use super::stream::Fanout;
use gyr_proto::batch_queue::BatchReceiver;
use gyr_proto::v1;
use gyr_proto::v1::gyr_client::GyrClient;
use std::time::Duration;
use tokio_stream::StreamExt;

/// How long to wait before trying an unreachable hub again.
const RETRY: Duration = Duration::from_secs(1);

/// Where and how to publish.
#[derive(Debug, Clone)]
pub(crate) struct Publisher {
    /// The hub's gRPC address, `host:port`.
    pub(crate) hub: String,
    /// The hub's token, when it listens beyond this machine.
    pub(crate) token: Option<String>,
    /// Who this program is.
    pub(crate) hello: v1::PublishHello,
}

/// The push's first subscription, made when the runtime starts (before any event reaches the
/// fan-out), and handed to [`run`].
pub(crate) fn subscribe_at_start(fanout: &Fanout) -> BatchReceiver {
    fanout.subscribe_publisher().0
}

/// Publishes until `stop` turns true and the fan-out has ended the stream. `first` is the
/// subscription made at start ([`subscribe_at_start`]): the first connection sends it.
pub(crate) async fn run(
    p: Publisher,
    fanout: Fanout,
    first: BatchReceiver,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut complained = false;
    let mut first = Some(first);
    loop {
        if *stop.borrow() {
            return;
        }
        match publish_once(&p, &fanout, &mut first).await {
            Ok(()) => complained = false,
            Err(e) => {
                if !complained {
                    crate::diag!(
                        "gyr: cannot publish to the hub at {}: {e}; retrying every {}s (the program runs on regardless)",
                        p.hub,
                        RETRY.as_secs()
                    );
                    complained = true;
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(RETRY) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

async fn publish_once(
    p: &Publisher,
    fanout: &Fanout,
    first: &mut Option<BatchReceiver>,
) -> Result<(), String> {
    let channel = gyr_client::connect::tcp(&p.hub)
        .await
        .map_err(|e| format!("{e} ({})", source_text(&e)))?;
    let mut client = GyrClient::new(channel);
    // The first connection sends what was queued since the start. A later one starts afresh:
    // what the outage cost is counted, and the count comes right after the hello.
    let (rx, missed) = match first.take() {
        Some(rx) => (rx, 0),
        None => fanout.subscribe_publisher(),
    };
    let hello = tokio_stream::once(v1::PublishMessage {
        kind: Some(v1::publish_message::Kind::Hello(p.hello.clone())),
    });
    let missed = (missed > 0).then(|| v1::PublishMessage {
        kind: Some(v1::publish_message::Kind::Batch(v1::EventBatch {
            lost: missed,
            ..Default::default()
        })),
    });
    let batches = Unsent {
        rx,
        fanout: fanout.clone(),
    }
    .map_while(|item| item.ok())
    .map(|b| v1::PublishMessage {
        kind: Some(v1::publish_message::Kind::Batch(b)),
    });
    let hello = hello.chain(tokio_stream::iter(missed));
    let mut req = tonic::Request::new(hello.chain(batches));
    if let Some(t) = &p.token
        && let Ok(v) = format!("Bearer {t}").parse()
    {
        req.metadata_mut().insert("authorization", v);
    }
    client
        .publish(req)
        .await
        .map(|_| ())
        .map_err(|s| s.message().to_owned())
}

/// The push's queue, as the request's stream: when the connection goes down with batches
/// still queued, their records are counted as missed.
struct Unsent {
    rx: BatchReceiver,
    fanout: Fanout,
}

impl tokio_stream::Stream for Unsent {
    type Item = gyr_proto::batch_queue::Item;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::pin::Pin::new(&mut self.rx).poll_next(cx)
    }
}

impl Drop for Unsent {
    fn drop(&mut self) {
        self.rx.close();
        let mut records = 0;
        while let Some(item) = self.rx.try_recv() {
            if let Ok(b) = item {
                records += b.lost
                    + b.blocks
                        .iter()
                        .map(|k| {
                            gyr_core::record::Records::new(k.thread, &k.records).count() as u64
                        })
                        .sum::<u64>();
            }
        }
        if records > 0 {
            self.fanout.publisher_missed(records);
        }
    }
}

fn source_text(e: &dyn std::error::Error) -> String {
    let mut s = String::new();
    let mut cur = e.source();
    while let Some(c) = cur {
        s = c.to_string();
        cur = c.source();
    }
    if s.is_empty() { e.to_string() } else { s }
}
