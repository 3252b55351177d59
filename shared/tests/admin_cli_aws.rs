//! `rp-admin --backend aws` creates the first admin token and an app in DynamoDB, as an operator
//! does for a new deployment; the HTTP API on the same table then accepts that token.
//! Runs against the emulators; skipped, with a notice, when no endpoint is set.

use rp_shared::adapters::aws::AwsConfig;
use rp_shared::backend;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::SystemClock;
use rp_shared::testing::aws::{clients, endpoint, fresh_config, SERVICES};
use rp_shared::testing::http::TestClient;
use serde_json::Value;
use std::process::Command;
use std::sync::Arc;

/// `binary` on the AWS backend named by `config`, with nothing of this process's environment
/// but what is set here: the emulators' endpoints, a fixed region, dummy credentials, no IMDS.
fn on_emulators(binary: &str, config: &AwsConfig) -> Command {
    let mut command = Command::new(binary);
    command
        .env_clear()
        .env("RP_BACKEND", "aws")
        .env("TABLE_NAME", &config.table_name)
        .env("QUEUE_URL", &config.queue_url)
        .env("KMS_ENVELOPE_KEY_ID", &config.envelope_key_id)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for service in SERVICES {
        command.env(format!("AWS_ENDPOINT_URL_{service}"), endpoint(service).unwrap());
    }
    command
}

#[tokio::test]
async fn admin_cli_bootstraps_a_dynamodb_deployment() {
    let Some(clients) = clients().await else { return };
    let config = fresh_config(&clients).await;
    let cli = |args: &[&str]| {
        let out = on_emulators(env!("CARGO_BIN_EXE_rp-admin"), &config).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // An empty TABLE_NAME is not set, as for the functions: refused before any call.
    let out = on_emulators(env!("CARGO_BIN_EXE_rp-admin"), &config)
        .env("TABLE_NAME", "")
        .arg("create-table")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("TABLE_NAME is not set"), "{out:?}");
    cli(&["create-table"]);
    let admin =
        cli(&["create-admin-token", "--description", "first token"])["token"].as_str().unwrap().to_owned();
    cli(&["create-app", "--app-id", "workstationDemo", "--display-name", "Demo"]);
    let apps = cli(&["list-apps"]);
    assert_eq!(apps["apps"][0]["appId"], "workstationDemo");

    let backend = backend::aws_with_clients(&config, clients, Arc::new(SystemClock));
    let api = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    let r = api.send("GET", "/cc/api/apps/workstationDemo", Some(&admin), None).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["displayName"], "Demo");
}

/// `rp-local` with `RP_BACKEND=aws`, as docs/testing.md runs it on the emulators: it serves the API
/// over the configured table, stops cleanly on SIGTERM, and refuses to start when one service's
/// endpoint is off loopback (before it builds a client, so nothing is sent there).
#[tokio::test]
async fn the_local_server_runs_on_the_emulators_and_nowhere_else() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let Some(clients) = clients().await else { return };
    let config = fresh_config(&clients).await;
    let admin = "local-server-on-emulators-admin-token-0123";
    let local = |dynamodb: String| {
        let mut command = on_emulators(env!("CARGO_BIN_EXE_rp-local"), &config);
        command
            .env("PORT", "0")
            .env("LOCAL_ADMIN_TOKEN", admin)
            .env("RUST_LOG", "warn")
            .env("AWS_ENDPOINT_URL_DYNAMODB", dynamodb);
        command
    };

    let mut refused = local("https://dynamodb.us-east-1.amazonaws.com".into())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = (0..300).find_map(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        refused.try_wait().unwrap()
    });
    if status.is_none() {
        let _ = refused.kill();
        panic!("rp-local started against a table off loopback");
    }
    assert!(!status.unwrap().success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut refused.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("only against emulators") && stderr.contains("not on the loopback"), "{stderr}");

    let mut child = local(endpoint("DYNAMODB").unwrap()).stdout(Stdio::piped()).spawn().unwrap();
    // Held open to the end: the server may print again, and a closed pipe would fail it.
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let base = stdout
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("listening on ").map(str::to_owned))
        .expect("the server says where it listens");
    let created = reqwest::Client::new()
        .post(format!("{base}/cc/api/apps"))
        .bearer_auth(admin)
        .json(&serde_json::json!({"appId": "servedLocally", "displayName": "Served locally"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status().as_u16(), 201);

    // The app is in the emulator's table: the API over the same table, built here, reads it.
    let backend = backend::aws_with_clients(&config, clients, Arc::new(SystemClock));
    let api = TestClient::new(http::app(AppState::new(backend, HttpConfig::default())));
    let r = api.send("GET", "/cc/api/apps/servedLocally", Some(admin), None).await;
    assert_eq!(r.status, 200, "{}", r.json());
    assert_eq!(r.json()["displayName"], "Served locally");

    assert!(Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap().success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "a clean stop on SIGTERM: {exit}");
    drop(stdout);
}
