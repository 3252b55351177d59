//! Logging: JSON lines through `tracing`, one subscriber for every binary.

use tracing_subscriber::EnvFilter;

/// Installs the JSON log subscriber (level from `RUST_LOG`, default `info`). Safe to call twice.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_writer(std::io::stderr)
        .try_init();
}
