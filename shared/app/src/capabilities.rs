//! What a use case may ask for, one port at a time. A use case's signature names the
//! capabilities it uses (`state: &(impl HasStore + HasClock)`), so one that reaches for a port
//! it did not declare does not compile; [`AppState`] has them all, and every front door passes
//! it. The few that keep the whole state hand it on (the sandbox's signer holds it).

use crate::state::{AppState, HttpConfig};
use rp_ports::{Clock, ItemStore, KeyService, Push, Queue};

/// A capability: a trait with one accessor, and [`AppState`]'s answer to it.
macro_rules! capability {
    ($(#[$doc:meta])* $name:ident: $method:ident -> $port:ty = |$state:ident| $answer:expr) => {
        $(#[$doc])*
        pub trait $name: Send + Sync {
            fn $method(&self) -> &$port;
        }

        impl $name for AppState {
            fn $method(&self) -> &$port {
                let $state = self;
                $answer
            }
        }
    };
}

capability!(
    /// The storage port.
    HasStore: store -> dyn ItemStore = |state| state.backend.store.as_ref()
);
capability!(
    /// The clock.
    HasClock: clock -> dyn Clock = |state| state.backend.clock.as_ref()
);
capability!(
    /// The key service: envelope encryption.
    HasKeys: keys -> dyn KeyService = |state| state.backend.keys.as_ref()
);
capability!(
    /// The certificate requests' time-out queue.
    HasQueue: queue -> dyn Queue = |state| state.backend.queue.as_ref()
);
capability!(
    /// Mobile push.
    HasPush: push -> dyn Push = |state| state.backend.push.as_ref()
);
capability!(
    /// The settings the use cases are configured with.
    HasSettings: settings -> HttpConfig = |state| &state.config
);
