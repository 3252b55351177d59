//! The local server as a user runs it: a real process on a real port, stopped with SIGTERM and
//! started again on the same data directory.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

struct Server {
    child: Child,
    base: String,
    admin_token: Option<String>,
}

fn start(data_dir: &Path, preset_token: Option<&str>) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rp-local"));
    command
        .env("DATA_DIR", data_dir)
        .env("PORT", "0")
        .env("RUST_LOG", "warn")
        .env_remove("LOCAL_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(token) = preset_token {
        command.env("LOCAL_ADMIN_TOKEN", token);
    }
    let mut child = command.spawn().expect("rp-local starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut admin_token = None;
    loop {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not report its address within 30 s");
        };
        if let Some(token) = line.strip_prefix("admin token: ") {
            admin_token = Some(token.to_owned());
        }
        if let Some(base) = line.strip_prefix("listening on ") {
            return Server { child, base: base.to_owned(), admin_token };
        }
    }
}

fn stop(mut server: Server) {
    let status = Command::new("kill").arg("-TERM").arg(server.child.id().to_string()).status().unwrap();
    assert!(status.success());
    for _ in 0..100 {
        if let Some(exit) = server.child.try_wait().unwrap() {
            assert!(exit.success(), "clean exit on SIGTERM: {exit}");
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    server.child.kill().unwrap();
    panic!("the server did not stop within 10 s of SIGTERM");
}

async fn call(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut request = client.request(method, format!("{}{path}", server.base)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the server answers");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap() })
}

#[tokio::test]
async fn data_and_tokens_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), None);
    let admin = server.admin_token.clone().expect("first start prints the admin token");
    assert!(admin.starts_with("rpt_"));
    let post = |path, body| call(&server, reqwest::Method::POST, path, &admin, Some(body));
    let (status, _) = post("/cc/api/apps", json!({"appId": "workstationDemo", "displayName": "Demo"})).await;
    assert_eq!(status, 201);
    let (status, created) =
        post("/cc/api/tokens", json!({"kind": "access", "appId": "workstationDemo"})).await;
    assert_eq!(status, 201);
    let access = created["token"].as_str().unwrap().to_owned();
    let (status, problem) = call(&server, reqwest::Method::GET, "/cc/api/apps", &access, None).await;
    assert_eq!((status, problem["errorCode"].as_u64()), (403, Some(1_100_003)));
    stop(server);

    let server = start(dir.path(), None);
    assert_eq!(server.admin_token, None, "the admin token is shown once, on first start");
    let (status, app) =
        call(&server, reqwest::Method::GET, "/cc/api/apps/workstationDemo", &admin, None).await;
    assert_eq!(status, 200);
    assert_eq!(app["displayName"], "Demo");
    stop(server);
}

#[tokio::test]
async fn local_admin_token_is_used_when_set() {
    let dir = tempfile::tempdir().unwrap();
    let preset = "local-dev-admin-token-0123456789";
    let server = start(dir.path(), Some(preset));
    assert_eq!(server.admin_token.as_deref(), Some("(the value of LOCAL_ADMIN_TOKEN)"), "never echoed");
    let (status, _) = call(&server, reqwest::Method::GET, "/cc/api/apps", preset, None).await;
    assert_eq!(status, 200);
    stop(server);
}

#[tokio::test]
async fn admin_cli_works_on_the_same_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_rp-admin"))
            .env("DATA_DIR", dir.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let token = run(&["create-admin-token", "--description", "ops"]);
    let admin = token["token"].as_str().unwrap().to_owned();
    run(&["create-app", "--app-id", "fromCli", "--display-name", "From the CLI"]);
    let access = run(&["create-access-token", "--app-id", "fromCli"]);
    assert_eq!(access["appId"], "fromCli");
    let dup = Command::new(env!("CARGO_BIN_EXE_rp-admin"))
        .env("DATA_DIR", dir.path())
        .args(["create-app", "--app-id", "fromCli", "--display-name", "x"])
        .output()
        .unwrap();
    assert!(!dup.status.success());
    assert!(String::from_utf8_lossy(&dup.stderr).contains("already exists"));

    let server = start(dir.path(), None);
    let (status, app) = call(&server, reqwest::Method::GET, "/cc/api/apps/fromCli", &admin, None).await;
    assert_eq!((status, app["displayName"].as_str()), (200, Some("From the CLI")));
    stop(server);
}

#[test]
fn a_short_chosen_admin_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rp-local"))
        .env("DATA_DIR", dir.path())
        .env("PORT", "0")
        .env("LOCAL_ADMIN_TOKEN", "only-twenty-one-chars")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("LOCAL_ADMIN_TOKEN must be 32"));
}

/// A SIGTERM as soon as the server says it is listening stops it cleanly: the handler is in
/// place before that line is printed (it once came later, and such a signal killed it).
#[test]
fn a_sigterm_right_after_listening_is_a_clean_stop() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        stop(start(dir.path(), None));
    }
}

/// What hyper refuses before any handler runs (a target over 64 KiB, a header that is not
/// HTTP) is answered as problem+json all the same, and the server goes on serving.
#[test]
fn what_the_parser_refuses_is_answered_as_a_problem() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), None);
    let address = server.base.strip_prefix("http://").unwrap().to_owned();
    let answer = |request: &[u8]| {
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(request).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        (head.to_owned(), serde_json::from_str::<Value>(body).unwrap())
    };
    let long = format!("GET /health?q={} HTTP/1.1\r\nhost: x\r\n\r\n", "a".repeat(100 * 1024));
    let (head, body) = answer(long.as_bytes());
    assert!(head.starts_with("HTTP/1.1 414 "), "{head}");
    assert!(head.contains("content-type: application/problem+json"), "{head}");
    assert_eq!((body["status"].as_u64(), body["errorCode"].as_u64()), (Some(414), Some(1_000_009)));
    let (head, body) = answer(b"GET /health HTTP/1.1\r\nbad header\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 400 "), "{head}");
    assert_eq!(body["type"], "/problems/malformed-request");
    let many: String = (0..200).map(|i| format!("x-h{i}: v\r\n")).collect();
    let (head, body) = answer(format!("GET /health HTTP/1.1\r\nhost: x\r\n{many}\r\n").as_bytes());
    assert!(head.starts_with("HTTP/1.1 431 "), "{head}");
    assert_eq!(body["type"], "/problems/headers-too-large");
    let (head, _) = answer(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    stop(server);
}

/// The local server is plain HTTP on loopback: its console cookie is not `Secure` (a client that
/// honours the attribute strictly would never send it back), and the session it names works.
#[tokio::test]
async fn the_console_signs_in_over_plain_loopback_http() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), None);
    let admin = server.admin_token.clone().unwrap();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let signed_in = client
        .post(format!("{}/console/sign-in", server.base))
        .form(&[("token", admin.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    let cookie = signed_in.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && !cookie.contains("Secure"), "{cookie}");
    let session = cookie.split(';').next().unwrap();
    let apps =
        client.get(format!("{}/console/apps", server.base)).header("cookie", session).send().await.unwrap();
    assert_eq!(apps.status(), 200);
    stop(server);
}
