//! The push port: waking a device through its platform (SNS mobile push on AWS; a recorder on
//! the embedded backend). A wake-up never carries a secret: see [`rp_domain::push`].

use async_trait::async_trait;

pub use rp_domain::boundary::PushError;
pub use rp_domain::push::{Platform, WakeUp};

/// A device's push token to register: in the platform application `application` (its ARN),
/// replacing the token of `endpoint` (the device's current one) if it has one.
#[derive(Debug, Clone, Copy)]
pub struct EndpointRequest<'a> {
    pub application: &'a str,
    pub token: &'a str,
    pub endpoint: Option<&'a str>,
}

#[async_trait]
pub trait Push: Send + Sync {
    /// The platform endpoint of the request's token: a new one, or its `endpoint` with the
    /// token replaced and enabled again.
    async fn register(&self, request: EndpointRequest<'_>) -> Result<String, PushError>;

    /// Sends `wake` to `endpoint` (of `platform`). [`PushError::Gone`] when the endpoint is
    /// disabled or deleted.
    async fn send(&self, endpoint: &str, platform: Platform, wake: &WakeUp) -> Result<(), PushError>;

    /// Deletes `endpoint` (a removed device's), and with it the token it holds; one gone
    /// already is no error.
    async fn remove(&self, endpoint: &str) -> Result<(), PushError>;
}
