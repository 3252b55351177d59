//! A push service that records what it is asked to send, then passes it on to the backend's own
//! (the embedded recorder, or SNS on an emulator): the router suite reads what each device was
//! told, on every backend. A case can make the next sends fail as the platform would.

use crate::ports::push::{EndpointRequest, Platform, Push, PushError, WakeUp};
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One wake-up, as asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub endpoint: String,
    pub platform: Platform,
    pub wake: WakeUp,
    /// Whether the backend's push service took it.
    pub delivered: bool,
}

pub struct RecordingPush {
    inner: Arc<dyn Push>,
    asked: Mutex<Vec<Asked>>,
    removed: Mutex<Vec<String>>,
    /// What the next sends answer instead of sending, in order.
    failures: Mutex<VecDeque<PushError>>,
    /// What the next registrations answer instead of registering, in order.
    refusals: Mutex<VecDeque<PushError>>,
}

impl RecordingPush {
    pub fn new(inner: Arc<dyn Push>) -> Self {
        Self {
            inner,
            asked: Mutex::default(),
            removed: Mutex::default(),
            failures: Mutex::default(),
            refusals: Mutex::default(),
        }
    }

    /// The next registrations fail with `refusals`, in their order, without reaching the
    /// platform.
    pub fn refuse_next_registrations(&self, refusals: impl IntoIterator<Item = PushError>) {
        self.refusals.lock().unwrap().extend(refusals);
    }

    /// The next sends fail with `failures`, in their order, without reaching the platform.
    pub fn fail_next(&self, failures: impl IntoIterator<Item = PushError>) {
        self.failures.lock().unwrap().extend(failures);
    }

    /// Every wake-up asked for so far, oldest first.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }

    /// Every endpoint the backend's push service removed, oldest first.
    pub fn removed(&self) -> Vec<String> {
        self.removed.lock().unwrap().clone()
    }
}

#[async_trait]
impl Push for RecordingPush {
    async fn register(&self, request: EndpointRequest<'_>) -> Result<String, PushError> {
        let refusal = self.refusals.lock().unwrap().pop_front();
        match refusal {
            Some(refusal) => Err(refusal),
            None => self.inner.register(request).await,
        }
    }

    async fn send(&self, endpoint: &str, platform: Platform, wake: &WakeUp) -> Result<(), PushError> {
        let failure = self.failures.lock().unwrap().pop_front();
        let sent = match failure {
            Some(failure) => Err(failure),
            None => self.inner.send(endpoint, platform, wake).await,
        };
        let asked =
            Asked { endpoint: endpoint.to_owned(), platform, wake: wake.clone(), delivered: sent.is_ok() };
        self.asked.lock().unwrap().push(asked);
        sent
    }

    async fn remove(&self, endpoint: &str) -> Result<(), PushError> {
        self.inner.remove(endpoint).await?;
        self.removed.lock().unwrap().push(endpoint.to_owned());
        Ok(())
    }
}
