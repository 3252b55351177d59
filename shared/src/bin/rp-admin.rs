//! `rp-admin`: create the first admin token, apps and access tokens without HTTP.

use clap::Parser;
use rp_shared::admin::{run, Cli};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let backend = rp_shared::backend::Backend::embedded(&cli.data_dir)?;
    let output = run(&backend, cli.command).await?;
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(())
}
