//! Ports: the traits every storage, queue, key and clock operation goes through. Each has an
//! embedded adapter ([`crate::adapters::embedded`]) and an AWS adapter ([`crate::adapters::aws`]).

pub mod clock;
pub mod held;
pub mod keys;
pub mod queue;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use keys::{EncryptionContext, KeyError, KeyService, Sealed};
pub use queue::{Queue, QueueError, ReceivedMessage};
pub use store::{
    retry_on_conflict, retry_on_conflict_from, Condition, Cursor, Increment, Index, Invalid, Item, ItemKey,
    ItemStore, MaybeConflict, Page, Query, SortKey, StoreError, WriteOp,
};
