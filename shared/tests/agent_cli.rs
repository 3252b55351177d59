//! `rp-agent` refuses to start without a token, with a SID map it cannot use, or on a CA
//! directory another agent has open, before it polls anything.

use std::process::Command;

#[test]
fn rp_agent_refuses_an_empty_token_before_polling() {
    let blank = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(blank.path(), " \n").unwrap();
    let ca = tempfile::tempdir().unwrap();
    let token_file = blank.path().to_str().unwrap();
    for (token, args) in
        [(None, vec![]), (Some(""), vec![]), (Some(" \t"), vec![]), (None, vec!["--token-file", token_file])]
    {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rp-agent"));
        // Port 9 on loopback: were a poll sent, it would fail with a connection error instead.
        command.env_clear().args(["--once", "--base-url", "http://127.0.0.1:9", "--ca-dir"]);
        command.arg(ca.path()).args(&args);
        if let Some(token) = token {
            command.env("RP_ADMIN_TOKEN", token);
        }
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{token:?} {args:?}");
        assert!(stderr.contains("set RP_ADMIN_TOKEN, or --token-file"), "{token:?} {args:?}: {stderr}");
    }
}

#[test]
fn rp_agent_names_a_token_file_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-token");
    let out = Command::new(env!("CARGO_BIN_EXE_rp-agent"))
        .env_clear()
        .args(["--once", "--base-url", "http://127.0.0.1:9", "--token-file"])
        .arg(&missing)
        .arg("--ca-dir")
        .arg(dir.path().join("ca"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
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
        // Port 9 on loopback: were a poll sent, it would fail with a connection error instead.
        let out = Command::new(env!("CARGO_BIN_EXE_rp-agent"))
            .env_clear()
            .env("RP_ADMIN_TOKEN", "rpt_any-admin-token")
            .args(["--once", "--base-url", "http://127.0.0.1:9", "--sid-map"])
            .arg(map)
            .arg("--ca-dir")
            .arg(dir.path().join("ca"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains(&says), "{stderr}");
    }
}

#[test]
fn a_second_rp_agent_on_one_ca_directory_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca");
    let agent = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rp-agent"));
        // Port 9 on loopback: the first agent's passes fail and it keeps polling.
        command.env_clear().env("RP_ADMIN_TOKEN", "rpt_any-admin-token");
        command.args(["--base-url", "http://127.0.0.1:9", "--interval-secs", "1", "--ca-dir"]).arg(&ca);
        command
    };
    let mut first = agent().stderr(std::process::Stdio::null()).spawn().unwrap();
    // The first holds the directory once it has made the CA in it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ca.join("ca-cert.der").exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = agent().arg("--once").output().unwrap();
    first.kill().unwrap();
    first.wait().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("another agent has the CA in"), "{stderr}");
    // Once the first has ended, the directory opens again.
    let out = agent().arg("--once").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("another agent"), "{stderr}");
}
