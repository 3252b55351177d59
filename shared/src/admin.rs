//! The operator's CLI (`rp-admin`): bootstrap tokens and apps without HTTP access.

use crate::adapters::aws::TrustRoots;
use crate::app;
use crate::backend::{self, Backend};
pub use crate::config::BackendKind;
use crate::config::Config;
use crate::domain::apps::{self, AppId};
use crate::domain::tokens::{TokenKind, TokenSecret};
use anyhow::Context as _;
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "rp-admin", about = "Administer the relying-party backend directly, without HTTP")]
pub struct Cli {
    /// Which backend to administer: the embedded data directory, or the AWS deployment named by
    /// TABLE_NAME, QUEUE_URL and KMS_ENVELOPE_KEY_ID (the stack's outputs).
    #[arg(long, env = "RP_BACKEND", value_enum, default_value_t = BackendKind::Embedded, global = true)]
    pub backend: BackendKind,
    /// Data directory of the embedded backend (stop the local server first: it holds the lock).
    #[arg(long, env = "DATA_DIR", default_value = ".data", global = true)]
    pub data_dir: PathBuf,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a controlCenterAdmin token; the token is printed once.
    CreateAdminToken {
        /// Use this value instead of a generated one (16 to 512 printable ASCII characters).
        #[arg(long, env = "RP_ADMIN_TOKEN_VALUE", hide_env_values = true)]
        token: Option<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        expires_in_secs: Option<i64>,
    },
    /// Create an access token bound to one app; the token is printed once.
    CreateAccessToken {
        #[arg(long)]
        app_id: String,
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        expires_in_secs: Option<i64>,
    },
    /// Create an RP app with default workstation settings.
    CreateApp {
        #[arg(long)]
        app_id: String,
        #[arg(long)]
        display_name: String,
    },
    /// List RP apps.
    ListApps,
    /// Create the DynamoDB table with its indexes and TTL (for emulators; on AWS the SAM
    /// template creates it). AWS backend only.
    CreateTable,
    /// Put in place everything the sample events of `events/` refer to (app, tokens, devices,
    /// an enrollment and pairing, leased certificate requests, an OOB request, customizations),
    /// so that each answers 2xx through its function. For an empty store: the embedded data
    /// directory, or an emulator's table. Never on a real deployment: the sample tokens are public.
    SeedSamples,
    /// The wake-ups the embedded backend recorded (what a phone would have been sent), oldest
    /// first. It reads the data directory's `pushes.jsonl`, so it runs beside the local server.
    /// Embedded backend only: on AWS, SNS delivers them.
    Pushes,
}

/// The wake-ups recorded in `data_dir` (`rp-admin pushes`).
pub fn pushes(data_dir: &std::path::Path) -> anyhow::Result<Value> {
    let sent = crate::adapters::embedded::EmbeddedPush::sent(data_dir).with_context(|| {
        format!("reading {}", data_dir.join(crate::adapters::embedded::PUSH_LOG).display())
    })?;
    Ok(json!({ "pushes": sent }))
}

/// Opens the backend the CLI was pointed at.
pub async fn open_backend(cli: &Cli) -> anyhow::Result<Backend> {
    Ok(match cli.backend {
        BackendKind::Embedded => backend::embedded(&cli.data_dir)?,
        BackendKind::Aws => {
            let config = Config::from_env(BackendKind::Aws)?;
            let aws = config.aws.as_ref().expect("read for BackendKind::Aws");
            backend::aws_from_config(aws, crate::adapters::aws::ClientSet::ALL).await?
        }
    })
}

/// Creates the table named by `TABLE_NAME` on the configured DynamoDB endpoint, as
/// `infra/template.yaml` defines it.
pub async fn create_table_from_env() -> anyhow::Result<Value> {
    // Read as every other variable is: an empty value is not set.
    let table = crate::config::env_var("TABLE_NAME").context("TABLE_NAME is not set")?;
    let roots = TrustRoots::from_lookup(&crate::config::env_var).map_err(anyhow::Error::msg)?;
    let sdk = crate::adapters::aws::sdk_config(roots).await?;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    crate::adapters::aws::provision::create_table(&client, &table, &crate::template::stateful().table)
        .await?;
    Ok(json!({ "table": table, "status": "active" }))
}

/// Runs one command and returns what to print.
pub async fn run(backend: &Backend, command: Command) -> anyhow::Result<Value> {
    // The CLI calls the use cases the API calls, with the API's default settings.
    let state = app::AppState::new(backend.clone(), app::HttpConfig::default());
    match command {
        Command::CreateAdminToken { token: Some(value), description, expires_in_secs: None } => {
            let secret = TokenSecret::parse_chosen(&value)
                .context("--token must be 32 to 512 printable ASCII characters without spaces")?;
            let description = description.unwrap_or_else(|| "installed by rp-admin".into());
            let created = app::apps::install_admin_token(&state, &secret, &description).await?;
            anyhow::ensure!(created, "this token is already installed");
            Ok(json!({ "tokenId": secret.hash().token_id(), "kind": TokenKind::ControlCenterAdmin }))
        }
        Command::CreateAdminToken { token: Some(_), .. } => {
            anyhow::bail!("--token and --expires-in-secs do not go together")
        }
        Command::CreateAdminToken { token: None, description, expires_in_secs } => {
            let kind = TokenKind::ControlCenterAdmin;
            let (secret, record) =
                app::apps::create_token(&state, kind, None, None, description, expires_in_secs).await?;
            Ok(json!({ "tokenId": record.token_id, "kind": record.kind, "token": secret.expose() }))
        }
        Command::CreateAccessToken { app_id, description, expires_in_secs } => {
            let app_id = AppId::parse("app-id", &app_id)?;
            let found = Some(app::apps::app(&state, &app_id).await);
            let (secret, record) = app::apps::create_token(
                &state,
                TokenKind::Access,
                Some(app_id),
                found,
                description,
                expires_in_secs,
            )
            .await?;
            Ok(
                json!({ "tokenId": record.token_id, "kind": record.kind, "appId": record.app_id, "token": secret.expose() }),
            )
        }
        Command::CreateApp { app_id, display_name } => {
            let app_id = AppId::parse("app-id", &app_id)?;
            apps::display_name("display-name", &display_name)?;
            let created = app::apps::create_app(&state, app_id, display_name).await?;
            Ok(json!({ "appId": created.app_id, "displayName": created.display_name }))
        }
        Command::ListApps => {
            let mut all = Vec::new();
            let mut cursor = None;
            loop {
                let (page, next) = app::apps::list_apps(&state, 200, cursor).await?;
                all.extend(
                    page.into_iter().map(|a| json!({ "appId": a.app_id, "displayName": a.display_name })),
                );
                match next {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
            Ok(json!({ "apps": all }))
        }
        Command::CreateTable => create_table_from_env().await,
        Command::Pushes => anyhow::bail!("pushes reads the data directory: run it as `rp-admin pushes`"),
        Command::SeedSamples => {
            // The sample tokens are published in events/: never on a real deployment.
            let endpoint = crate::config::endpoint_of(crate::config::env_var, "DYNAMODB");
            let loopback = endpoint.is_some_and(|e| crate::config::is_loopback_url(&e));
            anyhow::ensure!(
                backend.store.kind() != "dynamodb" || loopback,
                "seed-samples writes public sample tokens: only into the embedded store or an emulator on loopback"
            );
            crate::samples::seed(backend).await
        }
    }
}
