//! `rp-admin --backend aws` creates the first admin token and an app in DynamoDB, as an operator
//! does for a new deployment; the HTTP API on the same table then accepts that token.
//! Runs against the emulators; skipped, with a notice, when no endpoint is set.

use rp_shared::backend::Backend;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::SystemClock;
use rp_shared::testing::aws::{clients, endpoint, fresh_config, SERVICES};
use rp_shared::testing::http::TestClient;
use serde_json::Value;
use std::process::Command;
use std::sync::Arc;

#[tokio::test]
async fn admin_cli_bootstraps_a_dynamodb_deployment() {
    let Some(clients) = clients().await else { return };
    let config = fresh_config(&clients, 5).await;
    let cli = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rp-admin"));
        command
            .env_clear()
            .env("RP_BACKEND", "aws")
            .env("TABLE_NAME", &config.table_name)
            .env("QUEUE_URL", &config.queue_url)
            .env("KMS_ENVELOPE_KEY_ID", &config.envelope_key_id)
            .env("KMS_SIGNING_KEY_ID", &config.signing_key_id)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .args(args);
        for service in SERVICES {
            command.env(format!("AWS_ENDPOINT_URL_{service}"), endpoint(service).unwrap());
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    cli(&["create-table"]);
    let admin =
        cli(&["create-admin-token", "--description", "first token"])["token"].as_str().unwrap().to_owned();
    cli(&["create-app", "--app-id", "workstationDemo", "--display-name", "Demo"]);
    let apps = cli(&["list-apps"]);
    assert_eq!(apps["apps"][0]["appId"], "workstationDemo");

    let backend = Backend::aws_with_clients(&config, clients, Arc::new(SystemClock));
    let api = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    let r = api.send("GET", "/cc/api/apps/workstationDemo", Some(&admin), None).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["displayName"], "Demo");
}
