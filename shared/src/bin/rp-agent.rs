//! `rp-agent`: the reference enrollment agent.

use anyhow::Context;
use clap::Parser;
use rp_shared::agent::{Agent, LocalCa};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "rp-agent",
    about = "Reference enrollment agent: issues and revokes workstation login certificates"
)]
struct Cli {
    #[command(flatten)]
    api: rp_shared::agent::ApiAddress,
    /// A file holding the controlCenterAdmin token (else RP_ADMIN_TOKEN; never a flag, which
    /// other users could read in the process list).
    #[arg(long, env = "RP_ADMIN_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// Where the agent's CA lives (created on first run).
    #[arg(long, env = "RP_AGENT_CA_DIR", default_value = ".agent-ca")]
    ca_dir: PathBuf,
    /// Seconds between polls.
    #[arg(long, env = "RP_AGENT_INTERVAL_SECS", default_value_t = 15)]
    interval_secs: u64,
    /// Poll once and exit.
    #[arg(long)]
    once: bool,
    /// The API's public address, which the certificates' CRL distribution point and CA issuers
    /// URL point under (default: the base URL).
    #[arg(long, env = "RP_PUBLIC_BASE_URL")]
    public_base_url: Option<String>,
    /// Seconds between CRL publications when nothing is revoked (a revocation publishes at
    /// once); each CRL's nextUpdate is twice this.
    #[arg(long, env = "RP_AGENT_CRL_REFRESH_SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(60..=604_800))]
    crl_refresh_secs: u64,
    /// A CSV of user principal names and SIDs exported from Active Directory (columns
    /// UserPrincipalName and SID): each certificate then carries its user's SID, which domain
    /// controllers enforcing strong certificate mapping require; read again at every pass.
    #[arg(long, env = "RP_AGENT_SID_MAP")]
    sid_map: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    rp_shared::telemetry::init();
    let cli = Cli::parse();
    // A token has no white space, so what surrounds it (a file's newline, a pasted space) is
    // dropped, from the file and the variable alike; an empty token (unset, empty, or blank) is
    // refused here rather than sent to be refused at every poll.
    let token = match &cli.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the token file {}", path.display()))?,
        ),
        None => rp_shared::config::env_var("RP_ADMIN_TOKEN"),
    }
    .map(|text| text.trim().to_owned())
    .filter(|token| !token.is_empty())
    .ok_or_else(|| anyhow::anyhow!("set RP_ADMIN_TOKEN, or --token-file, to a controlCenterAdmin token"))?;
    let mut agent = Agent::new(&cli.api.base_url, &token, Arc::new(LocalCa::open_or_create(&cli.ca_dir)?))?
        .with_crl_refresh(Duration::from_secs(cli.crl_refresh_secs));
    if let Some(url) = &cli.public_base_url {
        agent = agent.with_public_base_url(url);
    }
    if let Some(path) = &cli.sid_map {
        agent = agent.with_sid_map(path)?;
    }
    if cli.once {
        let report = agent.run_once().await?;
        println!(
            "issued {} revoked {} failed {} dropped {} refused {} crl {}",
            report.issued.len(),
            report.revoked.len(),
            report.failed.len(),
            report.dropped.len(),
            report.refused.len(),
            report.crl.map_or("-".into(), |n| n.to_string())
        );
        return Ok(());
    }
    agent.run(Duration::from_secs(cli.interval_secs), rp_shared::local::shutdown_signal()).await;
    Ok(())
}
