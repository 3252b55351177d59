//! Test support shared by every backend's suites: the port contract suite and an HTTP driver.
//! Compiled into the library (it is small) so that `tests/` can run it against any backend.

pub mod aws;
pub mod contract;
pub mod events;
pub mod fixtures;
pub mod http;
pub mod iam;
pub mod push;
pub use rp_ports::trips;
