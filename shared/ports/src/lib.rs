//! Ports: the traits every storage, queue, key and clock operation goes through, and the business
//! metrics every layer may count. Each trait has an embedded adapter and an AWS adapter in
//! `rp-adapters`; the composition root (`rp-shared`) picks one set at start-up.

pub mod absent;
pub mod backend;
pub mod clock;
pub mod held;
pub mod iam;
pub mod keys;
pub mod metrics;
pub mod push;
pub mod queue;
pub mod store;
/// A backend that records its round trips: for tests and benchmarks only.
#[cfg(feature = "testing")]
pub mod trips;

pub use backend::{Backend, Services};
pub use clock::{Clock, ManualClock, SystemClock};
pub use keys::{EncryptionContext, KeyError, KeyService, Sealed};
pub use push::{EndpointRequest, Push, PushError};
pub use queue::{Queue, QueueError, ReceivedMessage};
pub use store::{
    from_opaque_token, opaque_token, retry_on_conflict, retry_on_conflict_from, Condition, Cursor, Increment,
    Index, Invalid, Item, ItemKey, ItemStore, Listed, MaybeConflict, Page, Query, SortKey, StoreError,
    WriteOp,
};
