//! What a use case may ask for, one port at a time. A use case's signature names the
//! capabilities it uses (`state: &(impl HasStore + HasClock)`), so one that reaches for a port
//! it did not declare does not compile; [`AppState`] has them all, and every front door passes
//! it. The few that keep the whole state hand it on (the sandbox's signer holds it).

use crate::{AppState, HttpConfig};
use rp_ports::{Clock, ItemStore, KeyService, Push, Queue};

/// The storage port.
pub trait HasStore: Send + Sync {
    fn store(&self) -> &dyn ItemStore;
}

/// The clock.
pub trait HasClock: Send + Sync {
    fn clock(&self) -> &dyn Clock;
}

/// The key service: envelope encryption.
pub trait HasKeys: Send + Sync {
    fn keys(&self) -> &dyn KeyService;
}

/// The certificate requests' time-out queue.
pub trait HasQueue: Send + Sync {
    fn queue(&self) -> &dyn Queue;
}

/// Mobile push.
pub trait HasPush: Send + Sync {
    fn push(&self) -> &dyn Push;
}

/// The settings the use cases are configured with.
pub trait HasSettings: Send + Sync {
    fn settings(&self) -> &HttpConfig;
}

impl HasStore for AppState {
    fn store(&self) -> &dyn ItemStore {
        self.backend.store.as_ref()
    }
}

impl HasClock for AppState {
    fn clock(&self) -> &dyn Clock {
        self.backend.clock.as_ref()
    }
}

impl HasKeys for AppState {
    fn keys(&self) -> &dyn KeyService {
        self.backend.keys.as_ref()
    }
}

impl HasQueue for AppState {
    fn queue(&self) -> &dyn Queue {
        self.backend.queue.as_ref()
    }
}

impl HasPush for AppState {
    fn push(&self) -> &dyn Push {
        self.backend.push.as_ref()
    }
}

impl HasSettings for AppState {
    fn settings(&self) -> &HttpConfig {
        &self.config
    }
}
