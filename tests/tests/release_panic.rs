//! A panicking handler in a function's binary answers a problem+json 500, and the process
//! serves the next invocation: the release profile unwinds (`panic = "unwind"`), so the
//! catch-panic layer runs on Lambda as it does locally.
//!
//! How a panic ends is the profile's `panic` strategy alone, so one test holds the release
//! profile (which the functions are built with) to the dev profile's strategy, and the other
//! runs the `panic_probe` binary as a process under a Lambda Runtime API of our own on
//! loopback. Cargo builds the binary with the test, in the test's profile (the dev profile;
//! a release build would compile every dependency again): `cargo test --release` runs it on
//! the release profile itself, slower.

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

mod runtime_api;

/// The sample `GET /health` event, sent to `path`.
fn event_for(path: &str) -> String {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../events/health.json");
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(sample).unwrap()).unwrap();
    event["rawPath"] = path.into();
    event["routeKey"] = format!("GET {path}").into();
    event["requestContext"]["http"]["path"] = path.into();
    event.to_string()
}

/// The `panic` key of each `[profile.<name>]` table of the workspace's `Cargo.toml`.
fn panic_strategies() -> Vec<(String, String)> {
    let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml")).unwrap();
    let mut table = String::new();
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = name.to_owned();
        } else if let Some(value) = line.strip_prefix("panic").and_then(|l| l.trim_start().strip_prefix('='))
        {
            found.push((table.clone(), value.trim().trim_matches('"').to_owned()));
        }
    }
    found
}

#[test]
fn the_release_profile_unwinds_as_the_probes_build_does() {
    let strategies = panic_strategies();
    let release: Vec<_> = strategies.iter().filter(|(table, _)| table == "profile.release").collect();
    // Said outright: cargo-lambda builds with `abort` where the profile leaves it out.
    assert_eq!(release, [&("profile.release".to_owned(), "unwind".to_owned())], "{strategies:?}");
    // The dev profile, which builds the probe, keeps Cargo's default: `unwind`.
    assert!(strategies.iter().all(|(table, _)| table != "profile.dev"), "{strategies:?}");
    for (table, strategy) in &strategies {
        assert_eq!(strategy, "unwind", "{table}: every profile a function may be built with unwinds");
    }
}

#[tokio::test]
async fn a_panicking_handler_answers_500_and_the_process_goes_on() {
    let binary = env!("CARGO_BIN_EXE_panic_probe");
    let events =
        vec![("after-the-panic".into(), event_for("/health")), ("panics".into(), event_for("/panic"))];
    let (address, mut answers) = runtime_api::start("panic-probe", events).await;

    let mut child = Command::new(binary)
        .env_clear()
        .envs(runtime_api::LAMBDA_ENV)
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "panic-probe")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the probe starts");

    let mut got = Vec::new();
    for _ in 0..2 {
        match tokio::time::timeout(Duration::from_secs(30), answers.recv()).await {
            Ok(Some(answer)) => got.push(answer),
            _ => break,
        }
    }
    let alive = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert_eq!(got.len(), 2, "both invocations were answered (the process lived on): {got:?}\n{log}");

    let (id, answer) = &got[0];
    assert_eq!(id, "panics");
    assert_eq!(answer["statusCode"], 500, "{answer}");
    let headers = &answer["headers"];
    assert_eq!(headers["content-type"], "application/problem+json", "{answer}");
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["errorCode"], 1_000_500, "{body}");
    assert!(!body["detail"].as_str().unwrap().contains("on purpose"), "the panic message stays in the log");

    let (id, answer) = &got[1];
    assert_eq!(id, "after-the-panic");
    assert_eq!(answer["statusCode"], 200, "{answer}");
    assert!(alive, "the process was still running after both answers");
}
