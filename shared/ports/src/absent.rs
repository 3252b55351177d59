//! The queue, key and push services of a function whose endpoint calls none of them: it builds no client for
//! them, so its binary links none. A call answers [`NotBuilt`] (a 503 at the edge): it means the
//! endpoint's [`Services`](crate::backend::Services) in `http::ENDPOINTS` leave out a service it
//! uses, which the router suites catch, since the local server builds every endpoint this way.

use crate::keys::{DataKey, EncryptionContext, KeyError, KeyService};
use crate::push::{EndpointRequest, Platform, Push, PushError, WakeUp};
use crate::queue::{Queue, QueueError, ReceivedMessage};
use async_trait::async_trait;
use std::time::Duration;

/// Stands in for a service the function was built without.
#[derive(Debug, Clone, Copy)]
pub struct Absent;

/// The error every call to an [`Absent`] service answers.
#[derive(Debug, thiserror::Error)]
#[error("the {0} is not among this endpoint's services (http::ENDPOINTS), so it was not built")]
pub struct NotBuilt(pub &'static str);

fn no_queue() -> QueueError {
    tracing::error!("an endpoint called the queue, which its declared services leave out");
    QueueError::unavailable(NotBuilt("queue"))
}

fn no_push() -> PushError {
    tracing::error!("an endpoint called the push service, which its declared services leave out");
    PushError::unavailable(NotBuilt("push service"))
}

fn no_keys() -> KeyError {
    tracing::error!("an endpoint called the key service, which its declared services leave out");
    KeyError::unavailable(NotBuilt("key service"))
}

#[async_trait]
impl Queue for Absent {
    async fn send(&self, _body: &str, _delay: Duration) -> Result<String, QueueError> {
        Err(no_queue())
    }
    async fn receive(&self, _max: usize, _visibility: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        Err(no_queue())
    }
    async fn ack(&self, _receipt: &str) -> Result<(), QueueError> {
        Err(no_queue())
    }
    async fn dead_letter(&self, _body: &str) -> Result<(), QueueError> {
        Err(no_queue())
    }
    async fn dead_letters(&self, _max: usize) -> Result<Vec<ReceivedMessage>, QueueError> {
        Err(no_queue())
    }
}

#[async_trait]
impl KeyService for Absent {
    async fn generate_data_key(&self, _context: &EncryptionContext) -> Result<DataKey, KeyError> {
        Err(no_keys())
    }
    async fn decrypt_data_key(
        &self,
        _wrapped: &[u8],
        _context: &EncryptionContext,
    ) -> Result<[u8; 32], KeyError> {
        Err(no_keys())
    }
}

#[async_trait]
impl Push for Absent {
    async fn register(&self, _request: EndpointRequest<'_>) -> Result<String, PushError> {
        Err(no_push())
    }
    async fn send(&self, _endpoint: &str, _platform: Platform, _wake: &WakeUp) -> Result<(), PushError> {
        Err(no_push())
    }
    async fn remove(&self, _endpoint: &str) -> Result<(), PushError> {
        Err(no_push())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_call_to_an_absent_service_fails_naming_it() {
        let err = Queue::send(&Absent, "{}", Duration::ZERO).await.unwrap_err();
        assert!(matches!(&err, QueueError::Unavailable(e) if e.to_string().starts_with("the queue is not")));
        assert!(Absent.dead_letter("{}").await.is_err());
        let Err(err) = Absent.generate_data_key(&EncryptionContext::new("t", "p")).await else {
            panic!("an absent key service made a data key")
        };
        assert!(
            matches!(&err, KeyError::Unavailable(e) if e.to_string().starts_with("the key service is not"))
        );
        assert!(Absent.decrypt_data_key(b"w", &EncryptionContext::new("t", "p")).await.is_err());
        let wake = WakeUp { kind: rp_domain::push::WakeKind::Oob, id: "r".into() };
        let err = Push::send(&Absent, "e", Platform::Apns, &wake).await.unwrap_err();
        assert!(
            matches!(&err, PushError::Unavailable(e) if e.to_string().starts_with("the push service is not"))
        );
    }
}
