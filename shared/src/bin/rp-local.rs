//! `rp-local`: the whole API on 127.0.0.1 over the embedded backend.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rp_shared::telemetry::init();
    let config = rp_shared::local::LocalConfig::from_env()?;
    rp_shared::local::run(config, rp_shared::local::shutdown_signal()).await
}
