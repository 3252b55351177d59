//! The reference agent against a stub server that answers each route as a case says: what the
//! agent posts, and what it makes of a refusal (409, 410) or an error (500) for each of its
//! posts. The contract suite runs the agent against the real API; these are the answers that
//! API gives only in races, or never.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::Json;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use p256::elliptic_curve::sec1::ToEncodedPoint as _;
use rp_shared::agent::{Agent, LocalCa};
use rp_shared::testing::http::serve;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The stub's routes' answers (by path; 200 where unnamed) and every request it took.
#[derive(Clone, Default)]
struct Stub {
    answers: Arc<HashMap<&'static str, StatusCode>>,
    poll: Arc<Value>,
    seen: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Stub {
    fn posted(&self, path: &str) -> Vec<Value> {
        self.seen.lock().unwrap().iter().filter(|(p, _)| p == path).map(|(_, body)| body.clone()).collect()
    }
}

/// The stub's name for the CA's CRL route, `/rp/pki/<CA id>/crl`.
const CRL: &str = "CRL";

async fn answer(State(stub): State<Stub>, request: Request) -> (StatusCode, Json<Value>) {
    let path = match request.uri().path() {
        p if p.starts_with("/rp/pki/") && p.ends_with("/crl") => CRL.to_owned(),
        p => p.to_owned(),
    };
    let bytes = axum::body::to_bytes(request.into_body(), 1 << 20).await.unwrap();
    stub.seen.lock().unwrap().push((path.clone(), serde_json::from_slice(&bytes).unwrap_or(Value::Null)));
    let status = stub.answers.get(path.as_str()).copied().unwrap_or(StatusCode::OK);
    let body = if path == "/rp/api/certificate/requests" { (*stub.poll).clone() } else { json!({}) };
    (status, Json(body))
}

/// An agent with a fresh CA against a stub that hands out `poll` and answers `answers`.
async fn agent_against(
    poll: Value,
    answers: &[(&'static str, StatusCode)],
) -> (Agent, Stub, tempfile::TempDir, tokio::task::JoinHandle<()>) {
    let stub = Stub {
        answers: Arc::new(answers.iter().copied().collect()),
        poll: Arc::new(poll),
        ..Stub::default()
    };
    let router = axum::Router::new().fallback(answer).with_state(stub.clone());
    let (base, server) = serve(router).await;
    let dir = tempfile::tempdir().unwrap();
    let ca = Arc::new(LocalCa::open_or_create(dir.path()).unwrap());
    (Agent::new(&base, "rpt_any-admin-token-the-stub-ignores", ca).unwrap(), stub, dir, server)
}

fn login_cert(id: &str, user: &str, ws_name: &str) -> Value {
    let agreement = p256::SecretKey::random(&mut rand::rngs::OsRng);
    let key = STANDARD.encode(agreement.public_key().to_encoded_point(false).as_bytes());
    json!({"requestId": id, "requestTimeoutInSecs": 300, "machineUserNameWS": ws_name, "machineUserName": user,
        "deviceId": "d-1", "deviceKeyAgreementPublicKey": key, "encCounter": "1"})
}

fn revocation(id: &str, serial: &str) -> Value {
    json!({"requestId": id, "requestTimeoutInSecs": 300, "certSerialNumber": serial})
}

#[tokio::test]
async fn an_issued_certificate_names_the_user_and_the_workstation_user() {
    let poll = json!({"loginCerts": [login_cert("r-1", "ann@example.com", "CORP\\ann"), login_cert("r-2", "bo@example.com", "")],
        "revokedCerts": []});
    let (agent, stub, _dir, _server) = agent_against(poll, &[]).await;
    let report = agent.run_once().await.unwrap();
    assert_eq!(report.issued, ["r-1", "r-2"]);
    let names: Vec<Value> =
        stub.posted("/rp/api/certificate").iter().map(|r| r["machineUserNames"].clone()).collect();
    assert_eq!(names, [json!(["ann@example.com", "CORP\\ann"]), json!(["bo@example.com"])], "no empty name");
}

/// A certificate whose result the server refuses (it kept another agent's, or the request is
/// dead) would be valid at the CA and unknown to the server: the agent revokes it in its CA, and
/// the CRL the pass publishes lists it.
#[tokio::test]
async fn the_agent_revokes_a_refused_certificate() {
    let poll = json!({"loginCerts": [login_cert("r-1", "vera@example.com", "")], "revokedCerts": []});
    for refusal in [StatusCode::CONFLICT, StatusCode::GONE] {
        let (agent, stub, dir, _server) =
            agent_against(poll.clone(), &[("/rp/api/certificate", refusal)]).await;
        let report = agent.run_once().await.unwrap();
        assert_eq!(report.refused, ["r-1"], "{refusal}: {report:?}");
        let state: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("revoked.json")).unwrap()).unwrap();
        let revoked: Vec<&String> = state["revoked"].as_object().unwrap().keys().collect();
        assert_eq!(revoked.len(), 1, "the orphaned certificate is revoked at the CA");
        let posted = &stub.posted("/rp/api/certificate")[0]["loginCertSerialNumber"];
        assert_eq!(posted, revoked[0].as_str());
        let crl =
            STANDARD.decode(stub.posted(CRL).last().expect("a CRL was published")["crl"].as_str().unwrap());
        assert_eq!(rp_shared::testing::fixtures::crl_serials(&crl.unwrap()), [revoked[0].clone()]);
    }
}

#[tokio::test]
async fn a_refused_revocation_is_reported_and_an_error_fails_the_pass() {
    let poll = json!({"loginCerts": [], "revokedCerts": [revocation("v-1", "1a01")]});
    for refusal in [StatusCode::CONFLICT, StatusCode::GONE] {
        let (agent, stub, _dir, _server) =
            agent_against(poll.clone(), &[("/rp/api/certificate/revoke", refusal)]).await;
        let report = agent.run_once().await.unwrap();
        assert_eq!((report.revoked.len(), report.refused), (0, vec!["v-1".to_owned()]), "{refusal}");
        assert_eq!(stub.posted("/rp/api/certificate/revoke")[0]["certSerialNumber"], "1a01");
    }
    let (agent, _stub, _dir, _server) =
        agent_against(poll, &[("/rp/api/certificate/revoke", StatusCode::INTERNAL_SERVER_ERROR)]).await;
    let err = agent.run_once().await.unwrap_err().to_string();
    assert_eq!(err, "posting a revocation answered 500 Internal Server Error");
}

/// A 409 to a CRL means a later one of this CA is published already; any other error fails the
/// pass, and the next pass publishes again.
#[tokio::test]
async fn a_crl_that_is_not_taken_fails_the_pass_unless_a_later_one_is_published() {
    let poll = json!({"loginCerts": [], "revokedCerts": []});
    let (agent, stub, _dir, _server) = agent_against(poll.clone(), &[(CRL, StatusCode::CONFLICT)]).await;
    assert!(agent.run_once().await.unwrap().crl.is_some());
    assert_eq!(stub.posted(CRL).len(), 1);
    let (agent, stub, _dir, _server) = agent_against(poll, &[(CRL, StatusCode::INTERNAL_SERVER_ERROR)]).await;
    let err = format!("{:#}", agent.run_once().await.unwrap_err());
    assert!(err.contains("publishing the CRL answered 500 Internal Server Error"), "{err}");
    // The next pass publishes again, though the refresh interval has not passed.
    agent.run_once().await.unwrap_err();
    assert_eq!(stub.posted(CRL).len(), 2);
}

/// A failed issuance posts the error result and the failure event; a result refused (409, 410)
/// still gets its event, and an error to either post fails the pass.
#[tokio::test]
async fn a_failure_is_posted_with_its_event_and_an_error_fails_the_pass() {
    // A request with no device key cannot be issued.
    let mut bad = login_cert("r-1", "ann@example.com", "");
    bad.as_object_mut().unwrap().remove("deviceKeyAgreementPublicKey");
    let poll = json!({"loginCerts": [bad], "revokedCerts": []});
    for status in [StatusCode::NO_CONTENT, StatusCode::CONFLICT, StatusCode::GONE] {
        let (agent, stub, _dir, _server) =
            agent_against(poll.clone(), &[("/rp/api/certificate", status)]).await;
        let report = agent.run_once().await.unwrap();
        assert_eq!(report.failed, ["r-1"], "{status}");
        let result = &stub.posted("/rp/api/certificate")[0];
        assert_eq!(
            (&result["errorCode"], &result["errorMessage"]),
            (&json!(2001), &json!("the request has no device key"))
        );
        let event = &stub.posted("/rp/api/events")[0];
        assert_eq!(
            event["attributes"],
            json!({"isSuccessful": false, "errorCode": 2001, "requestId": "r-1"})
        );
    }
    for (path, says) in [
        ("/rp/api/certificate", "posting an error result answered 500 Internal Server Error"),
        ("/rp/api/events", "posting the failure event answered 500 Internal Server Error"),
    ] {
        let (agent, _stub, _dir, _server) =
            agent_against(poll.clone(), &[(path, StatusCode::INTERNAL_SERVER_ERROR)]).await;
        assert_eq!(agent.run_once().await.unwrap_err().to_string(), says);
    }
}

/// `run` polls every interval until it is stopped.
#[tokio::test]
async fn the_agent_polls_until_it_is_stopped() {
    let poll = json!({"loginCerts": [], "revokedCerts": []});
    let (agent, stub, _dir, _server) = agent_against(poll, &[]).await;
    let polls = || stub.posted("/rp/api/certificate/requests").len();
    let stop = async {
        while polls() < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    let run = agent.run(std::time::Duration::from_millis(10), stop);
    tokio::time::timeout(std::time::Duration::from_secs(30), run).await.expect("stopped");
    assert!(polls() >= 3);
}
