//! The domain: newtypes that can only be built by parsing, records, and each area's lifecycle as
//! pure functions of (state, event, now) with an error enum of its own. No I/O, no AWS.

pub mod apps;
pub mod boundary;
pub mod certificates;
pub mod code;
pub mod console;
pub mod content;
pub mod devices;
pub mod enrollment;
pub mod envelope;
pub mod events;
pub mod idempotency;
pub mod messages;
pub mod offline;
pub mod oob;
pub mod pairing;
pub mod pki;
pub mod push;
pub mod signing;
pub mod time;
pub mod tokens;
pub mod validate;

pub use time::EpochMillis;
pub use validate::FieldError;
