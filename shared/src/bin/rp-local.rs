//! `rp-local`: the whole API on 127.0.0.1 over the embedded backend.

use rp_shared::config::{BackendKind, Config};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rp_shared::telemetry::init();
    let config = Config::from_env(BackendKind::Embedded)?;
    rp_shared::local::run(config, rp_shared::local::shutdown_signal()).await
}
