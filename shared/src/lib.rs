//! The relying-party backend's composition root: which adapters stand behind the ports
//! ([`backend`]), configuration, the Lambda and local front doors, the operator CLI, the
//! reference enrollment agent and the sample fixtures. Every layer below is re-exported under
//! its module name (`rp_shared::domain`, `::http`, ...), so a function's `main`, the tests and
//! the tools reach them all through this crate.

pub mod admin;
pub mod agent;
pub mod backend;
pub mod config;
pub mod consumer;
pub mod lambda;
pub mod local;
mod parser_answers;
pub mod samples;
pub mod telemetry;
pub mod template;
#[cfg(feature = "testing")]
pub mod testing;
pub mod worker;

pub use rp_adapters as adapters;
pub use rp_app as app;
pub use rp_domain as domain;
pub use rp_http as http;
pub use rp_ports as ports;
pub use rp_ports::metrics;
pub use rp_repo as repo;
pub use rp_sandbox as sandbox;
