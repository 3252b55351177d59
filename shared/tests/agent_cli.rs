//! `rp-agent` refuses to start without a token, with a SID map it cannot use, or on a CA
//! directory another agent has open, before it polls anything.

use std::path::Path;
use std::process::{Command, Output};

/// `rp-agent` on the CA directory `ca`, with no environment but `token` and the API on port 9 of
/// loopback: were a poll sent, it would fail with a connection error, not what a case looks for.
fn rp_agent(ca: &Path, token: Option<&str>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rp-agent"));
    command.env_clear().args(["--base-url", "http://127.0.0.1:9", "--ca-dir"]).arg(ca);
    if let Some(token) = token {
        command.env("RP_ADMIN_TOKEN", token);
    }
    command
}

/// What a run that failed said.
fn refused(out: &Output) -> String {
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn rp_agent_refuses_an_empty_token_before_polling() {
    let blank = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(blank.path(), " \n").unwrap();
    let ca = tempfile::tempdir().unwrap();
    let token_file = blank.path().to_str().unwrap();
    for (token, args) in
        [(None, vec![]), (Some(""), vec![]), (Some(" \t"), vec![]), (None, vec!["--token-file", token_file])]
    {
        let stderr = refused(&rp_agent(ca.path(), token).arg("--once").args(&args).output().unwrap());
        assert!(stderr.contains("set RP_ADMIN_TOKEN, or --token-file"), "{token:?} {args:?}: {stderr}");
    }
}

#[test]
fn rp_agent_names_a_token_file_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-token");
    let out = rp_agent(&dir.path().join("ca"), None).arg("--once").arg("--token-file").arg(&missing).output();
    let stderr = refused(&out.unwrap());
    assert!(stderr.contains(&format!("reading the token file {}", missing.display())), "{stderr}");
}

#[test]
fn rp_agent_refuses_a_sid_map_it_cannot_use_before_polling() {
    let dir = tempfile::tempdir().unwrap();
    let unreadable = dir.path().join("no-such-map.csv");
    let wrong = dir.path().join("sids.csv");
    std::fs::write(&wrong, "Name,SID\nsam,S-1-5-21-1-2-3-1104\n").unwrap();
    for (map, says) in [
        (&unreadable, format!("reading the SID map {}", unreadable.display())),
        (&wrong, "it has no UserPrincipalName column (its columns: Name, SID)".to_owned()),
    ] {
        let out = rp_agent(&dir.path().join("ca"), Some("rpt_any-admin-token"))
            .arg("--once")
            .arg("--sid-map")
            .arg(map)
            .output();
        let stderr = refused(&out.unwrap());
        assert!(stderr.contains(&says), "{stderr}");
    }
}

#[test]
fn a_second_rp_agent_on_one_ca_directory_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca");
    let token = Some("rpt_any-admin-token");
    // The first agent's passes fail against port 9, and it keeps polling.
    let mut first = rp_agent(&ca, token)
        .args(["--interval-secs", "1"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // It holds the directory once it has made the CA in it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ca.join("ca-cert.der").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = rp_agent(&ca, token).arg("--once").output().unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    let stderr = refused(&second);
    assert!(stderr.contains("another agent has the CA in"), "{stderr}");
    // Once the first has ended, the directory opens again.
    let stderr = refused(&rp_agent(&ca, token).arg("--once").output().unwrap());
    assert!(!stderr.contains("another agent"), "{stderr}");
}
