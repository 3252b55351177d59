//! The set of ports one process runs on, as every use case and handler reaches them. Which
//! adapters stand behind them is chosen once, at start-up, by the composition root (`rp-shared`'s
//! `backend`).

use crate::absent::Absent;
use crate::clock::Clock;
use crate::keys::KeyService;
use crate::push::Push;
use crate::queue::Queue;
use crate::store::ItemStore;
use std::sync::Arc;

#[derive(Clone)]
pub struct Backend {
    pub store: Arc<dyn ItemStore>,
    pub queue: Arc<dyn Queue>,
    pub keys: Arc<dyn KeyService>,
    pub push: Arc<dyn Push>,
    pub clock: Arc<dyn Clock>,
}

impl Backend {
    /// This backend as an endpoint that uses `services` sees it: the queue and the key service
    /// it leaves out are [`Absent`], as in a Lambda function built for that endpoint alone.
    pub fn only(&self, services: Services) -> Self {
        Self {
            store: self.store.clone(),
            queue: if services.queue { self.queue.clone() } else { Arc::new(Absent) },
            keys: if services.keys { self.keys.clone() } else { Arc::new(Absent) },
            push: if services.push { self.push.clone() } else { Arc::new(Absent) },
            clock: self.clock.clone(),
        }
    }
}

/// The backing services an endpoint calls besides the store and the clock, which every one
/// uses. Its Lambda function builds (and links) the clients of these only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Services {
    pub queue: bool,
    pub keys: bool,
    /// It wakes devices (SNS mobile push).
    pub push: bool,
}

impl Services {
    pub const STORE: Self = Self { queue: false, keys: false, push: false };
    pub const KEYS: Self = Self { queue: false, keys: true, push: false };
    pub const QUEUE: Self = Self { queue: true, keys: false, push: false };
    pub const PUSH: Self = Self { queue: false, keys: false, push: true };
    pub const KEYS_PUSH: Self = Self { queue: false, keys: true, push: true };
    pub const ALL: Self = Self { queue: true, keys: true, push: true };

    /// The constant's name, as each function's `main` spells it.
    pub fn name(self) -> &'static str {
        match (self.queue, self.keys, self.push) {
            (false, false, false) => "STORE",
            (false, true, false) => "KEYS",
            (true, false, false) => "QUEUE",
            (false, false, true) => "PUSH",
            (false, true, true) => "KEYS_PUSH",
            (true, true, true) => "ALL",
            _ => "UNNAMED",
        }
    }
}
