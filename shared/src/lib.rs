//! The relying-party backend's common crate: domain, ports, adapters, repositories and the HTTP
//! routers every Lambda function and the local server serve.

pub use rp_adapters as adapters;
pub mod admin;
pub mod agent;
pub mod backend;
pub mod config;
pub mod consumer;
pub use rp_domain as domain;
pub use rp_http as http;
pub mod lambda;
pub mod local;
pub use rp_ports as ports;
pub use rp_ports::metrics;
pub use rp_repo as repo;
pub mod samples;
pub use rp_sandbox as sandbox;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod worker;
