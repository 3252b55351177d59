//! Embedded adapters: everything in one data directory, no AWS and no emulator.
//!
//! - `rp.redb`: an on-disk redb database holding items, index entries and queue messages;
//! - `keys.json`: the local key file (AES-256 master key and P-256 signing key), mode 0600;
//! - `pushes.jsonl`: the wake-ups a phone would have been sent, mode 0600.

mod db;
mod keys;
mod push;
mod queue;
mod store;

pub use db::{EmbeddedDb, OpenError};
pub use keys::LocalKeyFile;
pub use push::{EmbeddedPush, SentPush, PUSH_LOG};
pub use queue::EmbeddedQueue;
pub use store::EmbeddedStore;
