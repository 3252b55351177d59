//! The push port: waking a device through its platform (SNS mobile push on AWS; a recorder on
//! the embedded backend). A wake-up never carries a secret: see [`rp_domain::push`].

use async_trait::async_trait;

pub use rp_domain::boundary::PushError;
pub use rp_domain::push::{Platform, WakeUp};

#[async_trait]
pub trait Push: Send + Sync {
    /// The platform endpoint of `token` in the platform application `application`: a new one,
    /// or `endpoint` (the device's current one) with its token replaced and enabled again.
    async fn register(
        &self,
        application: &str,
        token: &str,
        endpoint: Option<&str>,
    ) -> Result<String, PushError>;

    /// Sends `wake` to `endpoint` (of `platform`). [`PushError::Gone`] when the endpoint is
    /// disabled or deleted.
    async fn send(&self, endpoint: &str, platform: Platform, wake: &WakeUp) -> Result<(), PushError>;
}
