//! The local server: the whole API on 127.0.0.1, with the queue consumer running inside it.
//! Over the embedded backend by default; over the AWS adapters when its configuration names
//! them, and then only with every service on an emulator on the loopback interface.

use crate::backend::{self, Backend};
use crate::config::Config;
use crate::consumer::Dispatcher;
use crate::domain::tokens::{TokenKind, TokenSecret};
use crate::http::{self, AppState};
use crate::ports::{Condition, Item, ItemKey, StoreError};
use crate::repo::tokens;
use crate::worker::QueueWorker;
use anyhow::Context as _;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

const BOOTSTRAP_KEY: (&str, &str) = ("SYSTEM", "bootstrap");

/// Creates the first admin token on first start; returns the token to print, if one was made.
pub async fn bootstrap_admin(backend: &Backend, preset: Option<&str>) -> anyhow::Result<Option<String>> {
    let store = backend.store.as_ref();
    let now = backend.clock.now_millis();
    if let Some(value) = preset {
        let secret = TokenSecret::parse_chosen(value).context("LOCAL_ADMIN_TOKEN is not a valid token")?;
        let state = AppState::new(backend.clone(), http::HttpConfig::default());
        let created = crate::app::apps::install_admin_token(&state, &secret, "LOCAL_ADMIN_TOKEN").await?;
        mark_bootstrapped(backend).await?;
        // The operator knows it already: it is never echoed.
        return Ok(created.then(|| "(the value of LOCAL_ADMIN_TOKEN)".to_owned()));
    }
    let marker = ItemKey::new(BOOTSTRAP_KEY.0, BOOTSTRAP_KEY.1);
    if store.get(&marker).await?.is_some() {
        return Ok(None);
    }
    let (secret, _) = tokens::issue(
        store,
        now,
        TokenKind::ControlCenterAdmin,
        None,
        Some("created on first start".into()),
        None,
    )
    .await?;
    mark_bootstrapped(backend).await?;
    Ok(Some(secret.expose().to_owned()))
}

async fn mark_bootstrapped(backend: &Backend) -> anyhow::Result<()> {
    let marker = ItemKey::new(BOOTSTRAP_KEY.0, BOOTSTRAP_KEY.1);
    let item = Item::new(marker, &serde_json::json!({ "at": backend.clock.now_millis() }))?;
    match backend.store.put(item, Condition::Absent).await {
        Ok(_) | Err(StoreError::Conflict) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Runs until `shutdown` resolves, then stops accepting, drains in-flight requests, stops the
/// queue worker and closes the database.
pub async fn run(config: Config, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
    let backend = open_backend(&config, crate::config::env_var).await?;
    if let Some(token) = bootstrap_admin(&backend, config.admin_token.as_deref()).await? {
        println!("admin token: {token}");
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{}", config.port))?;
    let address = listener.local_addr()?;
    println!("listening on http://{address}");
    match &config.aws {
        None => tracing::info!(%address, data_dir = %config.data_dir.display(), "local server started"),
        Some(aws) => {
            tracing::info!(%address, table = %aws.table_name, "local server started on the emulators")
        }
    }

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let worker = QueueWorker {
        queue: backend.queue.clone(),
        handler: Arc::new(Dispatcher::new(backend.clone()).with_max_attempts(config.max_attempts)),
        visibility: Duration::from_secs(30),
        idle: Duration::from_millis(500),
    };
    let worker = tokio::spawn(worker.run(stop_rx));

    // Plain HTTP on the loopback interface: the console's cookie cannot be `Secure` here.
    let http = http::HttpConfig { secure_cookies: false, ..config.http(&format!("http://{address}")) };
    let state = AppState::new(backend, http);
    // The parser's own refusals (a target over 64 KiB, say) are answered as problem+json too.
    let listener = crate::parser_answers::AnsweringListener(listener);
    axum::serve(listener, http::app(state)).with_graceful_shutdown(shutdown).await?;
    let _ = stop_tx.send(true);
    worker.await.context("the queue worker failed")?;
    tracing::info!("local server stopped");
    Ok(())
}

/// The embedded data directory, or the AWS adapters when `config` names them. The local server
/// serves whoever reaches its port without the API Gateway and IAM in front of the functions, and
/// hands a fresh store its first admin token: it runs on AWS services only where they are
/// emulators on loopback, never on a deployment's table. `env` reads the endpoint variables.
async fn open_backend(config: &Config, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Backend> {
    match &config.aws {
        None => backend::embedded(&config.data_dir)
            .with_context(|| format!("cannot open the data directory {}", config.data_dir.display())),
        Some(aws) => {
            crate::config::emulator_endpoints(env)
                .context("the local server runs on the AWS adapters only against emulators")?;
            Ok(backend::aws_from_config(aws, crate::adapters::aws::ClientSet::ALL).await?)
        }
    }
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called, not when the
/// future is first polled, so a signal that comes as soon as the server says it is listening
/// still shuts it down cleanly rather than killing it. Call it inside the runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        async move {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(interrupt) => {}
                _ = wait(terminate) => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BackendKind;

    fn aws_config() -> Config {
        let get = |name: &str| match name {
            "TABLE_NAME" | "QUEUE_URL" | "KMS_ENVELOPE_KEY_ID" => Some("x".to_owned()),
            _ => None,
        };
        Config::from_lookup(get, BackendKind::Aws).expect("a complete AWS configuration")
    }

    #[tokio::test]
    async fn the_aws_adapters_run_only_on_emulators() {
        let remote = |name: &str| match name {
            "AWS_ENDPOINT_URL" => Some("http://127.0.0.1:1".to_owned()),
            "AWS_ENDPOINT_URL_DYNAMODB" => Some("https://dynamodb.us-east-1.amazonaws.com".to_owned()),
            _ => None,
        };
        let err = open_backend(&aws_config(), remote).await.err().expect("a remote table is refused");
        let text = format!("{err:#}");
        assert!(text.contains("only against emulators"), "{text}");
        assert!(text.contains("DYNAMODB endpoint https://dynamodb.us-east-1.amazonaws.com"), "{text}");
        let unset = |_: &str| None;
        let err = open_backend(&aws_config(), unset).await.err().expect("no endpoint is refused");
        assert!(format!("{err:#}").contains("no emulator endpoint for DYNAMODB"), "{err:#}");
    }
}
