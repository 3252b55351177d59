//! `rp-local`: the whole API on 127.0.0.1, over the embedded backend (the default) or, with
//! `RP_BACKEND=aws`, over DynamoDB, SQS and KMS emulators on loopback.

use clap::ValueEnum as _;
use rp_shared::config::{BackendKind, Config};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rp_shared::telemetry::init();
    let backend = match rp_shared::config::env_var("RP_BACKEND") {
        None => BackendKind::Embedded,
        Some(name) => BackendKind::from_str(&name, true)
            .map_err(|_| anyhow::anyhow!("RP_BACKEND must be 'embedded' or 'aws', not '{name}'"))?,
    };
    let config = Config::from_env(backend)?;
    rp_shared::local::run(config, rp_shared::local::shutdown_signal()).await
}
