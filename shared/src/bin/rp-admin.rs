//! `rp-admin`: create the first admin token, apps and access tokens without HTTP, on the
//! embedded backend or on DynamoDB.

use clap::Parser;
use rp_shared::admin::{create_table_from_env, open_backend, pushes, run, BackendKind, Cli, Command};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let output = match (&cli.command, cli.backend) {
        (Command::CreateTable, BackendKind::Aws) => create_table_from_env().await?,
        (Command::CreateTable, BackendKind::Embedded) => anyhow::bail!("create-table is for --backend aws"),
        (Command::Pushes, BackendKind::Embedded) => pushes(&cli.data_dir)?,
        (Command::Pushes, BackendKind::Aws) => {
            anyhow::bail!("pushes is for the embedded backend: on AWS, SNS delivers them")
        }
        _ => {
            let backend = open_backend(&cli).await?;
            run(&backend, cli.command).await?
        }
    };
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(())
}
