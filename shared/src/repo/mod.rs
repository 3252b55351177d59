//! Repositories: the domain's records mapped onto the storage port, written once for every
//! backend. Each module documents its item layout (partition key, sort key, indexes, TTL).

pub mod apps;
pub mod certificates;
pub mod code_env;
pub mod devices;
pub mod events;
pub mod oob;
pub mod ratelimit;
pub mod tokens;
pub mod versioned;
pub mod workstations;

/// How many independent reads one request has in flight at most (a user's device tokens, a
/// device's pairings).
pub(crate) const READS_AT_ONCE: usize = 16;
