//! The application layer: the use cases every front door calls (the HTTP routers, the admin CLI,
//! the tests). A use case takes what it was asked and the ports it needs, and owns the
//! orchestration: reads made at once, conflict retries, events, hooks, rate limits, metrics.
//! It knows nothing of HTTP: the routers in `rp-http` parse, authorize, call and answer.

use futures_util::future::MaybeDone;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

pub mod apps;
mod capabilities;
pub mod certificates;
pub mod code;
pub mod console;
pub mod customizations;
pub mod devices;
pub mod enrollment;
mod error;
pub mod events;
pub mod keybudget;
pub mod offline;
pub mod oob;
pub mod pairing;
pub mod pki;
pub mod push;
mod ratelimit;
pub mod renewal;
pub mod revocation;
pub mod signing;
mod state;

pub use capabilities::{HasClock, HasKeys, HasPush, HasQueue, HasSettings, HasStore};
pub use error::AppError;
pub use ratelimit::{count_request, within_rate_limit};
pub use state::{AppState, HttpConfig, LAMBDA_MAX_WAIT_SECS, LOCAL_MAX_WAIT_SECS};

/// The envelope context of a secret kept for one machine and device of `app`, for `purpose`: it
/// opens for that app, machine, device and purpose only.
fn pairing_context(
    app: &rp_domain::apps::AppId,
    purpose: &str,
    machine_id: &str,
    device_id: &str,
) -> rp_ports::EncryptionContext {
    rp_ports::EncryptionContext::new(app.as_str(), purpose)
        .with("machine", machine_id)
        .with("device", device_id)
}

/// Runs `first` to its end while `beside` makes progress too, and leaves `beside` where it got
/// to: the caller awaits it (`beside.as_mut().await`, then `take_output`) only if it still needs
/// what it reads, and drops it else. For reads that one decision may make unneeded: made at
/// once with the reads that decide, without waiting for them when they go unused.
async fn ahead_of<A, B>(first: A, mut beside: Pin<&mut MaybeDone<B>>) -> A::Output
where
    A: Future,
    B: Future,
{
    let mut first = std::pin::pin!(first);
    std::future::poll_fn(|cx| match first.as_mut().poll(cx) {
        // `first` is polled first, so that `beside` starts nothing more once it is done.
        Poll::Ready(out) => Poll::Ready(out),
        Poll::Pending => {
            let _ = beside.as_mut().poll(cx);
            Poll::Pending
        }
    })
    .await
}
