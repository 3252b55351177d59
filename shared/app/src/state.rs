//! What the use cases run with: the ports and the settings.

use crate::keybudget::{budgeted, DEFAULT_KEY_CALLS_PER_APP};
use rp_ports::held::{HeldKeys, HeldStore, Pass};
use rp_ports::{Backend, Services};
use std::sync::Arc;

/// What every use case and handler can reach: the ports and the settings.
#[derive(Clone)]
pub struct AppState {
    pub backend: Backend,
    pub config: Arc<HttpConfig>,
}

impl AppState {
    /// The state over `backend`, its key service behind each tenant's budget
    /// ([`HttpConfig::key_calls_per_app`]) unless that is 0.
    pub fn new(mut backend: Backend, config: HttpConfig) -> Self {
        if config.key_calls_per_app > 0 {
            let (keys, store, clock) = (backend.keys.clone(), backend.store.clone(), backend.clock.clone());
            backend.keys = Arc::new(budgeted(keys, store, clock, config.key_calls_per_app));
        }
        Self { backend, config: Arc::new(config) }
    }

    /// This state as an endpoint that uses `services` sees it ([`Backend::only`]).
    pub fn only(&self, services: Services) -> Self {
        Self { backend: self.backend.only(services), config: self.config.clone() }
    }

    /// This state with its store holding every write, and its key service every call, until
    /// `pass` opens (reads go at once): what a use case behind a count that is still running
    /// gets.
    pub fn held(&self, pass: &Pass) -> Self {
        let mut held = self.clone();
        held.backend.store = Arc::new(HeldStore::new(self.backend.store.clone(), pass.clone()));
        held.backend.keys = Arc::new(HeldKeys::new(self.backend.keys.clone(), pass.clone()));
        held
    }
}

/// The API's settings: the HTTP body limit, and what the use cases are configured with.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Largest request body accepted, in bytes.
    pub body_limit: usize,
    /// The server's public base URL (registration links and QR codes point here).
    pub public_base_url: String,
    /// Most certificate requests one poll hands out.
    pub poll_batch: usize,
    /// Leases a certificate request gets before it is DEAD (`CERT_MAX_ATTEMPTS`), on the result
    /// path as on the queue consumer's.
    pub max_attempts: u32,
    /// Open (pending or leased) login-certificate requests an app may have
    /// (`CERT_MAX_OPEN_PER_APP`); pairing past it answers 429.
    pub max_open_per_app: u32,
    /// Earlier versions kept per content customization (`CONTENT_VERSIONS_KEPT`).
    pub content_versions_kept: u64,
    /// The longest a device's OOB fetch may wait for a request (`?waitSecs=`): 25 s on the
    /// local server, 5 s on Lambda, where the function's time is paid.
    pub max_wait_secs: u64,
    /// Whether the console's session cookie is `Secure` (sent over HTTPS only): everywhere but
    /// the local server, which serves plain HTTP on the loopback interface.
    pub secure_cookies: bool,
    /// The longest an OOB start's `oob.start` customizations may run together: as long as one
    /// may run alone (20 s), so that the start answers within its function's time-out (25 s)
    /// however many a tenant enables.
    pub hook_budget: std::time::Duration,
    /// Key-service calls each app may make a second (`KMS_CALLS_PER_APP`), counted in the store;
    /// 0: no budget ([`crate::keybudget`]).
    pub key_calls_per_app: u32,
}

/// The longest long-poll of a device's OOB fetch on the local server, and on Lambda.
pub const LOCAL_MAX_WAIT_SECS: u64 = 25;
pub const LAMBDA_MAX_WAIT_SECS: u64 = 5;

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit: 64 * 1024,
            public_base_url: "http://127.0.0.1:8080".into(),
            poll_batch: rp_repo::certificates::DEFAULT_BATCH,
            max_attempts: rp_domain::certificates::DEFAULT_MAX_ATTEMPTS,
            max_open_per_app: rp_domain::certificates::DEFAULT_MAX_OPEN_PER_APP,
            content_versions_kept: rp_repo::versioned::DEFAULT_VERSIONS_KEPT,
            max_wait_secs: LOCAL_MAX_WAIT_SECS,
            secure_cookies: true,
            hook_budget: std::time::Duration::from_millis(u64::from(rp_domain::code::MAX_TIMEOUT_MS)),
            key_calls_per_app: DEFAULT_KEY_CALLS_PER_APP,
        }
    }
}
