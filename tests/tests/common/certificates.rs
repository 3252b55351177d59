//! Certificate queue cases: the poll and result contract, issuance end to end (device keys →
//! registration → pairing → agent → the device decrypts and checks the chain), revocation,
//! lease time-outs with re-queue and death, and concurrent pollers.

use super::workstation::link;
use super::Harness;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use p256::ecdsa::signature::Verifier;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::pkcs8::DecodePublicKey;
use rp_shared::agent::{Agent, LocalCa};
use rp_shared::consumer::Dispatcher;
use rp_shared::domain::apps::AppId;
use rp_shared::domain::certificates::{CertRequest, RequestKind, RequestState};
use rp_shared::domain::envelope::{self, Binding, LoginCertEnvelope};
use rp_shared::domain::messages::{LeaseRef, QueueMessage};
use rp_shared::domain::EpochMillis;
use rp_shared::http::problem::codes;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::Clock;
use rp_shared::ports::{Query, QueueError, ReceivedMessage};
use rp_shared::repo::certificates::{enqueue_ops, Certificates, READY_APPS, READY_GRACE_SECS};
use rp_shared::repo::workstations::Workstations;
use rp_shared::testing::http::serve;
use rp_shared::testing::http::{TestClient, TestResponse};
use rp_shared::worker::QueueWorker;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use x509_cert::der::{Decode, Encode};

/// A device the test holds the keys of.
pub struct TestDevice {
    pub device_id: String,
    pub token: String,
    pub agreement: p256::SecretKey,
    pub signing: p256::SecretKey,
    /// The registered user it belongs to.
    pub user: String,
    /// The app it is registered in.
    pub app: String,
}

/// The request `id` as one poll hands it out in its `list` (`loginCerts`, `revokedCerts`).
async fn polled_one(h: &Harness, list: &str, id: &str) -> serde_json::Value {
    let polled = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    let found = polled[list].as_array().unwrap().iter().find(|r| r["requestId"] == id).cloned();
    found.unwrap_or_else(|| panic!("{id} is handed out in {list}: {polled}"))
}

/// An object's member names, sorted.
fn member_names(object: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<_> = object.as_object().unwrap().keys().cloned().collect();
    names.sort();
    names
}

/// The serial of the first certificate device `dev` lists.
pub async fn first_serial(h: &Harness, dev: &TestDevice) -> String {
    let certs =
        h.client.send("GET", "/rp/versioned/device/certificates", Some(&dev.token), None).await.json();
    certs["certificates"][0]["certSerialNumber"].as_str().expect("a certificate").to_owned()
}

pub async fn device(h: &Harness, app: &str, user: &str, alias: Option<&str>) -> TestDevice {
    device_with_id(h, app, user, alias, &Harness::unique("dev")).await
}

/// A device call with `token` that only reads (the device's workstations): 200 while it works.
pub async fn as_device(client: &TestClient, token: &str) -> TestResponse {
    client.send("GET", "/rp/versioned/device/workstations", Some(token), None).await
}

/// The device trades `token` for a fresh one.
pub async fn refresh(client: &TestClient, token: &str) -> TestResponse {
    client.send("POST", "/rp/versioned/device/token", Some(token), None).await
}

/// The device token a registration or a refresh issued (201, not to be cached).
pub fn issued_token(r: TestResponse) -> String {
    assert_eq!((r.status.as_u16(), r.header("cache-control")), (201, Some("no-store")), "{}", r.json());
    r.json()["deviceToken"].as_str().unwrap().to_owned()
}

/// [`device`], registered under the id `device_id`.
pub async fn device_with_id(
    h: &Harness,
    app: &str,
    user: &str,
    alias: Option<&str>,
    device_id: &str,
) -> TestDevice {
    let code = link(h, app, user, alias.map(|a| json!({"machineUserNameWS": a}))).await["code"]
        .as_str()
        .unwrap()
        .to_owned();
    let signing = p256::SecretKey::random(&mut rand::rngs::OsRng);
    let agreement = p256::SecretKey::random(&mut rand::rngs::OsRng);
    let device_id = device_id.to_owned();
    let body = json!({
        "code": code, "deviceId": device_id, "friendlyName": "phone", "modelNumber": "m1",
        "signingPublicKey": STANDARD.encode(signing.public_key().to_encoded_point(false).as_bytes()),
        "keyAgreementPublicKey": STANDARD.encode(agreement.public_key().to_encoded_point(false).as_bytes()),
    });
    let r = h.client.send("POST", "/rp/versioned/device/registrations", None, Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let token = r.json()["deviceToken"].as_str().unwrap().to_owned();
    TestDevice { device_id, token, agreement, signing, user: user.to_owned(), app: app.to_owned() }
}

/// Enrolls `machine` for `user` (enroll, then complete) as the workstation `access` does.
pub async fn enroll(h: &Harness, access: &str, app: &str, user: &str, machine: &str) {
    let r = enroll_as(h, access, app, user, user, machine, json!({})).await;
    assert_eq!(r.status, 200, "{}", r.json());
}

/// Enroll under the workstation name `name`, then complete for `user` with `extra` fields
/// added to the complete request; the complete answer.
pub async fn enroll_as(
    h: &Harness,
    access: &str,
    app: &str,
    name: &str,
    user: &str,
    machine: &str,
    extra: serde_json::Value,
) -> rp_shared::testing::http::TestResponse {
    let r = h
        .client
        .send(
            "POST",
            "/rp/wsapi/client/enroll",
            Some(access),
            Some(json!({"rpAppId": app, "machineUserNameWS": name})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.json());
    // The body alone is enough to complete (the header carries the same id).
    let session = r.json()["response"]["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(r.header("x-enrollment-session-id"), Some(session.as_str()));
    let mut body = json!({"errorCode": 0, "sessionId": session, "signingCert": "MIIBszCCAVmgAwIBAgIU",
        "machineName": "WS", "machineId": machine, "machineUserName": user, "machineVersion": "10.0"});
    body.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    h.client.send("POST", "/rp/wasapi/client/enroll/complete", Some(access), Some(body)).await
}

/// Enrolls a machine for the device's user (in the device's app), pairs them, and returns the
/// queued request's id.
pub async fn pair(h: &Harness, access: &str, device: &TestDevice, machine: &str) -> String {
    enroll(h, access, &device.app, &device.user, machine).await;
    let body = json!({"machineId": machine, "deviceId": device.device_id, "machineUserNameWS": device.user});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(access), Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.json());
    r.json()["certificateRequestId"].as_str().unwrap().to_owned()
}

/// The API on a real loopback port, and an agent with a fresh CA talking to it.
pub async fn agent_for(h: &Harness) -> (Agent, Arc<LocalCa>, tokio::task::JoinHandle<()>) {
    let state = AppState::new(h.backend.clone(), HttpConfig::default());
    let (base, server) = serve(http::app(state)).await;
    let ca = Arc::new(LocalCa::open_or_create(&h.scratch_dir()).unwrap());
    (Agent::new(&base, &h.admin, ca.clone()).unwrap(), ca, server)
}

async fn state_of(h: &Harness, id: &str) -> CertRequest {
    h.request(id).await
}

fn pem_der(pem: &str, label: &str) -> Vec<u8> {
    let begin = format!("-----BEGIN {label}-----");
    let start = pem.find(&begin).expect("a PEM block") + begin.len();
    let end = pem[start..].find("-----END").unwrap() + start;
    STANDARD.decode(pem[start..end].split_whitespace().collect::<String>()).unwrap()
}

/// The envelope of one of `GET /rp/versioned/device/certificates`'s certificates.
fn envelope_of(c: &serde_json::Value) -> LoginCertEnvelope {
    let text = |name: &str| c[name].as_str().unwrap().to_owned();
    LoginCertEnvelope {
        version: c["envelopeVersion"].as_u64().unwrap() as u8,
        login_cert: text("loginCert"),
        iv_login_cert: text("ivLoginCert"),
        login_cert_auth: text("loginCertAuth"),
        issuer_key_agreement_public_key: text("issuerKeyAgreementPublicKey"),
        issuer_key_agreement_public_key_auth: text("issuerKeyAgreementPublicKeyAuth"),
        login_cert_signature: c["loginCertSignature"].as_str().map(str::to_owned),
    }
}

/// What the certificate's envelope is bound to, from the same answer.
fn binding_of(c: &serde_json::Value) -> Binding<'_> {
    Binding {
        request_id: c["requestId"].as_str().unwrap(),
        enc_counter: c["encCounter"].as_str().unwrap(),
        serial: c["certSerialNumber"].as_str().unwrap(),
        expiry_ms: c["loginCertExpiryDate"].as_i64().unwrap(),
    }
}

/// The public key of the CA certificate `signingCert` (DER), which signs version-2 envelopes.
fn issuer_key(signing_cert: &[u8]) -> p256::ecdsa::VerifyingKey {
    let cert = x509_cert::Certificate::from_der(signing_cert).unwrap();
    let spki = cert.tbs_certificate.subject_public_key_info.subject_public_key;
    p256::ecdsa::VerifyingKey::from_sec1_bytes(spki.raw_bytes()).unwrap()
}

/// Version 1 envelopes (the seed's, from older agents) are still accepted and served as such,
/// and the device still opens them; malformed version fields are 400s naming the field.
pub async fn version_1_envelopes_are_still_served(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "olga@example.com", None).await;
    let id = pair(&h, &access, &dev, "m-v1").await;
    let leased = h.poll().await.login_certs;
    let request = leased.iter().find(|r| r.request_id == id).unwrap();
    let counter = request.enc_counter.clone().unwrap();
    let device_key = request.device_key_agreement_public_key.clone().unwrap();
    let sealed = envelope::seal_v1(&device_key, &id, &counter, b"v1 bundle").unwrap();
    let mut result = json!({
        "errorCode": 0, "errorMessage": "", "requestId": id,
        "issuerKeyAgreementPublicKey": sealed.issuer_key_agreement_public_key,
        "issuerKeyAgreementPublicKeyAuth": sealed.issuer_key_agreement_public_key_auth,
        "loginCert": sealed.login_cert, "loginCertAuth": sealed.login_cert_auth,
        "loginCertSerialNumber": format!("0e{}", uuid::Uuid::new_v4().simple()),
        "loginCertExpiryDate": 1_900_000_000_000_i64, "ivLoginCert": sealed.iv_login_cert,
        "signingCert": "Y2E=", "machineUserNameWS": "", "machineUserNames": ["olga@example.com"],
    });
    let bad = [
        (json!({"envelopeVersion": 3}), "envelopeVersion"),
        (json!({"envelopeVersion": 2}), "loginCertSignature"),
        (json!({"envelopeVersion": 2, "loginCertSignature": "c2hvcnQ="}), "loginCertSignature"),
        (json!({"loginCertSignature": STANDARD.encode([7u8; 64])}), "loginCertSignature"),
    ];
    for (fields, field) in bad {
        let mut body = result.clone();
        body.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        let r = h.post_issuance(body).await;
        assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], field);
    }
    result["envelopeVersion"] = json!(1);
    assert_eq!(h.post_issuance(result).await.status, 204);
    let r = h.client.send("GET", "/rp/versioned/device/certificates", Some(&dev.token), None).await;
    let c = &r.json()["certificates"][0];
    assert_eq!((c["envelopeVersion"].as_u64(), c["loginCertSignature"].is_null()), (Some(1), true));
    let unused_issuer = *p256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng).verifying_key();
    let opened = envelope::open(&dev.agreement, &envelope_of(c), &binding_of(c), &unused_issuer).unwrap();
    assert_eq!(opened, b"v1 bundle");
}

/// Verifies that `cert_der` is signed by the CA certificate `ca_der`.
fn assert_chains_to(cert_der: &[u8], ca_der: &[u8]) {
    let cert = x509_cert::Certificate::from_der(cert_der).unwrap();
    let ca = x509_cert::Certificate::from_der(ca_der).unwrap();
    assert_eq!(cert.tbs_certificate.issuer, ca.tbs_certificate.subject, "issued by the CA");
    let spki = ca.tbs_certificate.subject_public_key_info.to_der().unwrap();
    let ca_key = p256::ecdsa::VerifyingKey::from_public_key_der(&spki).unwrap();
    let signature = p256::ecdsa::Signature::from_der(cert.signature.raw_bytes()).unwrap();
    ca_key.verify(&cert.tbs_certificate.to_der().unwrap(), &signature).expect("the CA's signature verifies");
}

pub async fn certificate_poll_and_results_contract(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    h.client
        .send("GET", "/rp/api/certificate/requests", Some(&access), None)
        .await
        .problem(403, codes::WRONG_TOKEN_KIND);
    h.client
        .send("GET", "/rp/api/certificate/requests", None, None)
        .await
        .problem(401, codes::MISSING_CREDENTIALS);
    let dev = device(&h, &app, "alice@example.com", None).await;
    let id = pair(&h, &access, &dev, "m-contract").await;
    let login = polled_one(&h, "loginCerts", &id).await;
    assert_eq!(
        member_names(&login),
        [
            "appId",
            "certificateValidityDays",
            "deviceId",
            "deviceKeyAgreementPublicKey",
            "encCounter",
            "machineUserName",
            "machineUserNameWS",
            "requestId",
            "requestTimeoutInSecs"
        ]
    );
    assert_eq!(state_of(&h, &id).await.state, RequestState::Leased);
    let again = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    assert!(
        again["loginCerts"].as_array().unwrap().iter().all(|r| r["requestId"] != id.as_str()),
        "a leased request is not handed out again"
    );

    let r = h
        .admin(
            "POST",
            "/rp/api/certificate",
            Some(json!({"errorCode": 3, "errorMessage": "no", "requestId": "no-such-request"})),
        )
        .await;
    assert_eq!(r.problem(404, codes::CERT_REQUEST_NOT_FOUND)["field"], "requestId");
    h.admin(
        "POST",
        "/rp/api/certificate",
        Some(json!({"errorCode": 3, "errorMessage": "no", "requestId": 12345})),
    )
    .await
    .problem(404, codes::CERT_REQUEST_NOT_FOUND);
    let long = h
        .admin(
            "POST",
            "/rp/api/certificate",
            Some(json!({"errorCode": 3, "errorMessage": "x".repeat(5001), "requestId": id})),
        )
        .await;
    assert_eq!(long.problem(400, codes::INVALID_FIELD)["field"], "errorMessage");
    let partial = h
        .admin(
            "POST",
            "/rp/api/certificate",
            Some(json!({"errorCode": 0, "errorMessage": "", "requestId": id})),
        )
        .await;
    partial.problem(400, codes::INVALID_FIELD);
    h.post_revocation(json!({"errorCode": 1, "errorMessage": "", "requestId": id}))
        .await
        .problem(404, codes::CERT_REQUEST_NOT_FOUND);

    let failure = json!({"errorCode": 42, "errorMessage": "directory lookup failed", "requestId": id});
    let r = h.post_issuance(failure.clone()).await;
    assert_eq!(r.status, 204, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(h.post_issuance(failure).await.status, 204, "the same result twice");
    let stored = state_of(&h, &id).await;
    assert_eq!((stored.state, stored.error_code), (RequestState::Failed, Some(42)));
    let events = h
        .admin("GET", &format!("/rp/api/events?appId={app}&name=WORKSTATION_CERTIFICATE_ISSUED"), None)
        .await
        .json();
    let events = events["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "stored once");
    assert_eq!(
        (events[0]["attributes"]["errorCode"].as_i64(), events[0]["attributes"]["isSuccessful"].as_bool()),
        (Some(42), Some(false))
    );
    let other = h
        .admin(
            "POST",
            "/rp/api/certificate",
            Some(json!({"errorCode": 43, "errorMessage": "", "requestId": id})),
        )
        .await;
    other.problem(409, codes::RESULT_DIFFERS);
    let empty = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    assert!(empty["loginCerts"].is_array() && empty["revokedCerts"].is_array());
}

pub async fn agent_issues_and_the_device_decrypts(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "erin@example.com", None).await;
    let id = pair(&h, &access, &dev, "m-issue").await;
    let (agent, ca, _server) = agent_for(&h).await;
    let report = agent.run_once().await.unwrap();
    assert!(report.issued.contains(&id), "{report:?}");
    let done = state_of(&h, &id).await;
    assert_eq!(done.state, RequestState::Done);

    let r = h.client.send("GET", "/rp/versioned/device/certificates", Some(&dev.token), None).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let certs = r.json()["certificates"].as_array().unwrap().clone();
    assert_eq!(certs.len(), 1);
    let c = &certs[0];
    let envelope = envelope_of(c);
    assert_eq!(envelope.version, 2, "the agent writes version 2");
    // Everything the key derivation and the signature check take comes with the certificate.
    let serial = c["certSerialNumber"].as_str().unwrap();
    let binding = binding_of(c);
    let signing_cert = STANDARD.decode(c["signingCert"].as_str().unwrap()).unwrap();
    assert_eq!(signing_cert, ca.certificate_der());
    let issuer = issuer_key(&signing_cert);
    let bundle = envelope::open(&dev.agreement, &envelope, &binding, &issuer).unwrap();
    assert_eq!(c["encCounter"].as_str(), done.enc_counter.as_deref());
    let bundle = String::from_utf8(bundle).unwrap();
    assert!(bundle.contains("BEGIN PRIVATE KEY"), "the login certificate comes with its key");
    let cert_der = pem_der(&bundle, "CERTIFICATE");
    // A relay that changes the serial or expiry the device is shown is caught.
    let moved = Binding { expiry_ms: binding.expiry_ms + 86_400_000, ..binding };
    assert!(envelope::open(&dev.agreement, &envelope, &moved, &issuer).is_err());
    let renamed = Binding { serial: "0e11", ..binding };
    assert!(envelope::open(&dev.agreement, &envelope, &renamed, &issuer).is_err());
    assert_eq!(serial, done.cert_serial_number.as_deref().unwrap());
    assert_chains_to(&cert_der, &signing_cert);
    let parsed = x509_cert::Certificate::from_der(&cert_der).unwrap();
    assert_eq!(
        hex::encode(parsed.tbs_certificate.serial_number.as_bytes()),
        c["certSerialNumber"].as_str().unwrap()
    );
    assert!(parsed.tbs_certificate.subject.to_string().contains("erin@example.com"));
    // Valid for the app's certificateValidityDays (90 by default), from five minutes back.
    let validity = &parsed.tbs_certificate.validity;
    let lived = validity.not_after.to_unix_duration() - validity.not_before.to_unix_duration();
    assert_eq!(lived.as_secs(), 90 * 86_400 + 300, "the app's validity reached the agent");
    // Another device cannot open it; a wrong device token gets nothing.
    assert!(envelope::open(&p256::SecretKey::random(&mut rand::rngs::OsRng), &envelope, &binding, &issuer)
        .is_err());
    let r = h
        .client
        .send("GET", "/rp/versioned/device/certificates", Some("rpd_not-a-real-device-token-at-all"), None)
        .await;
    r.problem(401, codes::INVALID_TOKEN);
    h.client
        .send("GET", "/rp/versioned/device/certificates", Some(&h.admin), None)
        .await
        .problem(401, codes::INVALID_TOKEN);

    // A second workstation, a second certificate: the list pages with a cursor.
    pair(&h, &access, &dev, "m-issue-2").await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 1);
    let list = |query: String| {
        let (client, token) = (h.client.clone(), dev.token.clone());
        async move {
            client.send("GET", &format!("/rp/versioned/device/certificates{query}"), Some(&token), None).await
        }
    };
    let (mut serials, mut query) = (Vec::new(), "?limit=1".to_owned());
    loop {
        let page = list(query).await.json();
        let certs = page["certificates"].as_array().unwrap();
        assert!(certs.len() <= 1, "{page}");
        serials.extend(certs.iter().map(|c| c["certSerialNumber"].as_str().unwrap().to_owned()));
        match page["nextCursor"].as_str() {
            Some(next) => query = format!("?limit=1&cursor={next}"),
            None => break,
        }
    }
    serials.dedup();
    assert_eq!(serials.len(), 2, "both certificates, one page at a time: {serials:?}");
    assert_eq!(list(String::new()).await.json()["certificates"].as_array().unwrap().len(), 2);
    list("?limit=0".into()).await.problem(400, codes::INVALID_FIELD);

    let events = h
        .admin("GET", &format!("/rp/api/events?appId={app}&name=WORKSTATION_CERTIFICATE_ISSUED"), None)
        .await
        .json();
    assert_eq!(events["events"][0]["attributes"]["isSuccessful"], true);
}

/// With a SID map, the agent writes each user's SID in their certificate (the strong mapping
/// Windows domain controllers enforce), matching the user name without case; a user the map does
/// not name gets no certificate, and the agent posts the failure.
pub async fn the_agent_writes_each_users_sid_from_its_map(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let mapped = device(&h, &app, "sam@example.com", None).await;
    let unmapped = device(&h, &app, "tess@example.com", None).await;
    let id = pair(&h, &access, &mapped, "m-sid").await;
    let missing = pair(&h, &access, &unmapped, "m-sid-2").await;
    let map = h.scratch_dir().join("sids.csv");
    std::fs::write(&map, "\"SID\",\"UserPrincipalName\"\r\n\"S-1-5-21-7-8-9-1104\",\"SAM@Example.com\"\r\n")
        .unwrap();
    let (agent, ca, _server) = agent_for(&h).await;
    let agent = agent.with_sid_map(&map).unwrap();
    let report = agent.run_once().await.unwrap();
    assert_eq!((report.issued, report.failed), (vec![id.clone()], vec![missing.clone()]));
    let failed = state_of(&h, &missing).await;
    assert_eq!(
        (failed.state, failed.error_code),
        (RequestState::Failed, Some(rp_shared::agent::ERROR_ISSUANCE))
    );

    let (pem, serial) = issued_pem(&h, &mapped).await;
    let cert = x509_cert::Certificate::from_der(&pem_der(&pem, "CERTIFICATE")).unwrap();
    let sid_oid = x509_cert::der::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.4.1.311.25.2");
    let ext =
        cert.tbs_certificate.extensions.unwrap().into_iter().find(|e| e.extn_id == sid_oid).expect("a SID");
    let names = x509_cert::ext::pkix::name::GeneralNames::from_der(ext.extn_value.as_bytes()).unwrap();
    let x509_cert::ext::pkix::name::GeneralName::OtherName(name) = &names[0] else { panic!("{names:?}") };
    let sid = name.value.decode_as::<x509_cert::der::asn1::OctetString>().unwrap();
    assert_eq!(sid.as_bytes(), b"S-1-5-21-7-8-9-1104");

    // A map that no longer parses fails the next pass, which issues nothing and still revokes.
    let again = pair(&h, &access, &mapped, "m-sid-3").await;
    let revoke = h.admin("POST", &format!("/cc/api/certificates/{serial}/revoke"), None).await;
    let revocation = revoke.json()["requestId"].as_str().unwrap().to_owned();
    std::fs::write(&map, "UserPrincipalName,SID\nsam@example.com,1104\n").unwrap();
    let err = format!("{:#}", agent.run_once().await.unwrap_err());
    assert!(err.contains("the pass issued nothing (its revocations are posted)"), "{err}");
    assert!(err.contains("line 2: '1104' is not a SID"), "{err}");
    assert_eq!(state_of(&h, &again).await.state, RequestState::Leased, "nothing posted");
    assert_eq!(state_of(&h, &revocation).await.state, RequestState::Done, "revoked all the same");
    assert!(ca.is_revoked(&serial));
}

/// The names the directory found for a user become that user's aliases, one user entity; a
/// name another user holds stays theirs, and the refused claim is an event. A name the directory
/// gives twice in two cases (beyond ASCII too) is one alias, which either case finds.
pub async fn directory_names_join_their_user_unless_taken(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    device(&h, &app, "alice@example.com", Some("CORP\\alice")).await;
    let erin = device(&h, &app, "erin@example.com", None).await;
    let id = pair(&h, &access, &erin, "m-names").await;
    assert!(h.poll().await.login_certs.iter().any(|r| r.request_id == id));
    let result = json!({
        "errorCode": 0, "errorMessage": "", "requestId": id,
        "issuerKeyAgreementPublicKey": "a2V5", "issuerKeyAgreementPublicKeyAuth": "YXV0aA==",
        "loginCert": "c2VhbGVk", "loginCertAuth": "YXV0aA==", "loginCertSerialNumber": "0e11",
        "loginCertExpiryDate": 1_900_000_000_000_i64, "ivLoginCert": "aXY=", "signingCert": "Y2E=",
        "machineUserNameWS": "", "machineUserNames":
            ["erin@example.com", "CORP\\erin", "CORP\\alice", "CORP\\Érin", "corp\\érin"],
    });
    assert_eq!(h.post_issuance(result).await.status, 204);
    let enroll_as = |name: &'static str| {
        let (client, access, app) = (h.client.clone(), access.clone(), app.clone());
        async move {
            let body = json!({"rpAppId": app, "machineUserNameWS": name});
            client.send("POST", "/rp/wsapi/client/enroll", Some(&access), Some(body)).await
        }
    };
    assert_eq!(enroll_as("CORP\\erin").await.status, 200, "the directory's name finds Erin");
    assert_eq!(enroll_as("Corp\\ÉRIN").await.status, 200, "so does either case of a name beyond ASCII");
    let aliases = super::workstation::aliases_of(&h, &app, "erin@example.com").await;
    assert_eq!(aliases, ["CORP\\erin", "CORP\\Érin"], "not her own name, nor Alice's, nor a name twice");
    let alice_device = enroll_as("CORP\\alice").await.json()["response"]["device"]["deviceId"].clone();
    assert_ne!(alice_device, json!(erin.device_id), "CORP\\alice still stands for Alice");
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=NAME_CLAIM_REFUSED"), None).await.json();
    assert_eq!(events["events"][0]["attributes"]["name"], "CORP\\alice", "{events}");
    assert_eq!(events["events"][0]["attributes"]["heldBy"], "alice@example.com", "{events}");
}

/// Mallory's workstation cannot pair her device under Alice's name, a machine must be enrolled
/// for the device's user before pairing, and a link cannot give away another user's alias.
pub async fn pairing_is_bound_to_enrollment_and_names(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let alice = device(&h, &app, "alice@example.com", Some("CORP\\alice")).await;
    let mallory = device(&h, &app, "mallory@example.com", None).await;
    let reg = |body: serde_json::Value| {
        let (client, access) = (h.client.clone(), access.clone());
        async move { client.send("POST", "/rp/api/client/reg", Some(&access), Some(body)).await }
    };
    // No enrollment of the machine: refused.
    let r = reg(json!({"machineId": "m-bare", "deviceId": mallory.device_id})).await;
    assert_eq!(r.problem(409, codes::NOT_ENROLLED)["field"], "machineId");
    // Enrolled for Mallory: her device pairs, but not under Alice's name nor an unknown one.
    enroll(&h, &access, &app, "mallory@example.com", "m-mallory").await;
    for name in ["CORP\\alice", "CORP\\nobody"] {
        let r =
            reg(json!({"machineId": "m-mallory", "deviceId": mallory.device_id, "machineUserNameWS": name}))
                .await;
        assert_eq!(r.problem(409, codes::NAME_OF_ANOTHER_USER)["field"], "machineUserNameWS", "{name}");
    }
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=NAME_CLAIM_REFUSED"), None).await.json();
    let alice_claim =
        events["events"].as_array().unwrap().iter().find(|e| e["attributes"]["name"] == "CORP\\alice");
    assert_eq!(
        alice_claim.expect("the claim is an event")["attributes"]["heldBy"],
        "alice@example.com",
        "{events}"
    );
    // Mallory's enrolled machine does not take Alice's device either.
    let r = reg(json!({"machineId": "m-mallory", "deviceId": alice.device_id})).await;
    r.problem(409, codes::NOT_ENROLLED);
    let r = reg(json!({"machineId": "m-mallory", "deviceId": mallory.device_id, "machineUserNameWS": "mallory@example.com"})).await;
    assert_eq!(r.status, 201, "{}", r.json());
    // A link cannot give Alice's alias to Mallory, nor can a registration take it.
    let r = h
        .admin(
            "POST",
            &format!("/cc/api/apps/{app}/users/mallory@example.com/registration-links"),
            Some(json!({"machineUserNameWS": "CORP\\ALICE"})),
        )
        .await;
    assert_eq!(r.problem(409, codes::ALIAS_TAKEN)["field"], "machineUserNameWS");
}

pub async fn revocation_round_trip(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "frank@example.com", None).await;
    pair(&h, &access, &dev, "m-revoke").await;
    let (agent, ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 1);
    let certs =
        h.client.send("GET", "/rp/versioned/device/certificates", Some(&dev.token), None).await.json();
    let serial = certs["certificates"][0]["certSerialNumber"].as_str().unwrap().to_owned();
    let expiry = certs["certificates"][0]["loginCertExpiryDate"].as_i64().unwrap();

    let r = h.admin("POST", &format!("/cc/api/certificates/{serial}/revoke"), None).await;
    assert_eq!(r.status, 202, "{}", r.json());
    let request_id = r.json()["requestId"].as_str().unwrap().to_owned();
    let certs =
        h.client.send("GET", "/rp/versioned/device/certificates", Some(&dev.token), None).await.json();
    assert_eq!(certs["certificates"][0]["revoked"], true, "withdrawn once its revocation is queued");
    let again = h.admin("POST", &format!("/cc/api/certificates/{serial}/revoke"), None).await;
    assert_eq!(
        (again.status.as_u16(), again.json()["requestId"].as_str()),
        (202, Some(request_id.as_str())),
        "one revocation per certificate"
    );
    h.admin("POST", "/cc/api/certificates/00ff/revoke", None).await.problem(404, codes::CERT_NOT_FOUND);

    let revoked = polled_one(&h, "revokedCerts", &request_id).await;
    assert_eq!(
        member_names(&revoked),
        ["appId", "certSerialNumber", "loginCertExpiryDate", "requestId", "requestTimeoutInSecs"],
        "the seed's, the app and the certificate's expiry"
    );
    assert_eq!(revoked["loginCertExpiryDate"], expiry, "so that the CA lists it until then");
    // A result that names another certificate than the one the request revokes changes nothing.
    let other = h
        .post_revocation(
            json!({"errorCode": 0, "requestId": request_id, "certSerialNumber": format!("{serial}ff")}),
        )
        .await;
    assert_eq!(other.problem(400, codes::INVALID_FIELD)["field"], "certSerialNumber");
    assert_eq!(state_of(&h, &request_id).await.state, RequestState::Leased);
    // The lease was taken by that poll; put it back so the agent gets it.
    let rec = h.request(&request_id).await;
    Dispatcher::new(h.backend.clone())
        .lease_expired(&request_id, rec.lease_id.as_deref().unwrap())
        .await
        .unwrap();
    let report = agent.run_once().await.unwrap();
    assert_eq!(report.revoked, vec![request_id.clone()], "{report:?}");
    assert!(ca.is_revoked(&serial));
    assert_eq!(state_of(&h, &request_id).await.state, RequestState::Done);
    let certs =
        h.client.send("GET", "/rp/versioned/device/certificates", Some(&dev.token), None).await.json();
    assert_eq!(certs["certificates"][0]["revoked"], true);
    let events =
        h.admin("GET", &format!("/rp/api/events?appId={app}&name=WS_CERTIFICATE_REVOKED"), None).await.json();
    assert_eq!(events["events"][0]["attributes"]["errorCode"], 0);
    h.admin("POST", &format!("/cc/api/certificates/{serial}/revoke"), None)
        .await
        .problem(409, codes::CERT_REVOKED);
}

async fn until<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A poll's leases get one time-out message per distinct time-out, not one each; the consumer
/// ends every lease a message names.
pub async fn a_poll_sends_one_time_out_message_per_time_out(h: Harness) {
    let app = AppId::parse("appId", &h.app().await).unwrap();
    let now = h.backend.clock.now_millis();
    let requests: Vec<_> = (0..12)
        .map(|i| CertRequest {
            machine_user_name: Some(format!("user{i}@example.com")),
            device_id: Some(format!("device-{i}")),
            // Two time-outs among the twelve: 1 s and 2 s.
            ..CertRequest::new(RequestKind::LoginCert, app.clone(), 1 + i % 2, EpochMillis(1_000 + i))
        })
        .collect();
    rp_shared::testing::fixtures::queue_in_bulk(h.backend.store.as_ref(), &requests, now).await;
    let polled = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    assert_eq!(polled["loginCerts"].as_array().unwrap().len(), 12);
    h.clock.advance(Duration::from_secs(3));
    let mut messages = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while messages.len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for the time-out messages");
        messages.extend(h.backend.queue.receive(10, Duration::from_secs(30)).await.unwrap());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Nothing more comes: one message per time-out.
    tokio::time::sleep(Duration::from_millis(500)).await;
    messages.extend(h.backend.queue.receive(10, Duration::from_secs(30)).await.unwrap());
    let mut sizes: Vec<usize> = messages
        .iter()
        .map(|m| match QueueMessage::parse(&m.body).unwrap() {
            QueueMessage::LeasesExpired { leases } => leases.len(),
            other => panic!("a poll sends grouped messages, not {other:?}"),
        })
        .collect();
    sizes.sort();
    assert_eq!(sizes, [6, 6], "one message per time-out, each with its six leases");
    let dispatcher = Dispatcher::new(h.backend.clone());
    for message in &messages {
        rp_shared::worker::MessageHandler::handle(&dispatcher, &message.body).await.unwrap();
    }
    for request in &requests {
        assert_eq!(state_of(&h, &request.request_id).await.state, RequestState::Pending, "lease ended");
    }
}

pub async fn leases_time_out_requeue_and_die(h: Harness) {
    let app = h.app().await;
    h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(json!({"requestTimeoutInSecs": 1})))
        .await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "gina@example.com", None).await;
    let id = pair(&h, &access, &dev, "m-timeout").await;
    // The consumer, as the SQS event source runs it on AWS and the local server runs it locally.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let worker = QueueWorker {
        queue: h.backend.queue.clone(),
        handler: Arc::new(Dispatcher::new(h.backend.clone()).with_max_attempts(2)),
        visibility: Duration::from_secs(5),
        idle: Duration::from_millis(200),
    };
    let worker = tokio::spawn(worker.run(stop_rx));

    let first = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    assert!(first["loginCerts"].as_array().unwrap().iter().any(|r| r["requestId"] == id.as_str()));
    let lease_one = state_of(&h, &id).await;
    assert_eq!((lease_one.state, lease_one.attempts), (RequestState::Leased, 1));
    // The queue's counts (what the console shows) follow it: leased, pending again, dead.
    let app_id = rp_shared::domain::apps::AppId::parse("appId", &app).unwrap();
    let counts = || async {
        let counts = Certificates::new(h.backend.store.as_ref()).queue_counts(&app_id, 10).await.unwrap();
        (counts.open, counts.pending_logins, counts.leased_logins(), counts.dead)
    };
    assert_eq!(counts().await, (1, 0, 1, 0), "open, pending, leased, dead");
    h.clock.advance(Duration::from_secs(2));
    until("the re-queue", Duration::from_secs(15), || async {
        state_of(&h, &id).await.state == RequestState::Pending
    })
    .await;
    assert_eq!(state_of(&h, &id).await.attempts, 1, "the attempt count stays with the request");
    assert_eq!(counts().await, (1, 1, 0, 0), "open, pending, leased, dead");
    // A result for the ended lease is refused, and the request stays queued.
    let late = json!({"errorCode": 9, "errorMessage": "late", "requestId": id});
    h.admin("POST", "/rp/api/certificate", Some(late)).await.problem(409, codes::LEASE_ENDED);
    assert_eq!(state_of(&h, &id).await.state, RequestState::Pending);

    let second = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    assert!(
        second["loginCerts"].as_array().unwrap().iter().any(|r| r["requestId"] == id.as_str()),
        "handed out again"
    );
    assert_eq!(state_of(&h, &id).await.attempts, 2);
    h.clock.advance(Duration::from_secs(2));
    until("the request to die", Duration::from_secs(15), || async {
        state_of(&h, &id).await.state == RequestState::Dead
    })
    .await;
    assert_death_reported(&h, &app).await;
    assert_eq!(counts().await, (0, 0, 0, 1), "dead, not open");
    until("the dead letter", Duration::from_secs(10), || async {
        let dead = h.backend.queue.dead_letters(10).await.unwrap();
        dead.iter().any(|m| m.body.contains(&id))
    })
    .await;
    let third = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    assert!(
        third["loginCerts"].as_array().unwrap().iter().all(|r| r["requestId"] != id.as_str()),
        "a dead request is not handed out"
    );
    let _ = stop_tx.send(true);
    worker.await.unwrap();
}

pub async fn concurrent_pollers_issue_each_request_once(h: Harness) {
    let Some(h) = h.for_races() else { return };
    let app = AppId::parse("appId", &h.app().await).unwrap();
    let agreement = p256::SecretKey::random(&mut rand::rngs::OsRng);
    let key = STANDARD.encode(agreement.public_key().to_encoded_point(false).as_bytes());
    let mut ids = HashSet::new();
    let store = h.backend.store.clone();
    let creates: Vec<_> = (0..200)
        .map(|i| {
            let request = CertRequest {
                request_id: format!("bulk-{}-{i:03}", uuid::Uuid::new_v4().simple()),
                machine_user_name: Some(format!("user{i}@example.com")),
                device_id: Some(format!("device-{i}")),
                device_key_agreement_public_key: Some(key.clone()),
                enc_counter: Some("1".into()),
                ..CertRequest::new(RequestKind::LoginCert, app.clone(), 300, EpochMillis(1_000 + i))
            };
            ids.insert(request.request_id.clone());
            let store = store.clone();
            tokio::spawn(async move {
                store.transact(enqueue_ops(&request, u32::MAX, request.created_at).unwrap()).await.unwrap()
            })
        })
        .collect();
    for c in creates {
        c.await.unwrap();
    }
    let (agent, _ca, _server) = agent_for(&h).await;
    let agent = Arc::new(agent);
    let pollers: Vec<_> = (0..4)
        .map(|_| {
            let agent = agent.clone();
            tokio::spawn(async move {
                let mut issued = Vec::new();
                let mut idle = 0;
                while idle < 3 {
                    let report = agent.run_once().await.unwrap();
                    assert!(report.failed.is_empty() && report.refused.is_empty(), "{report:?}");
                    if report.issued.is_empty() {
                        idle += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    } else {
                        idle = 0;
                    }
                    issued.extend(report.issued);
                }
                issued
            })
        })
        .collect();
    let mut all = Vec::new();
    for p in pollers {
        all.extend(p.await.unwrap());
    }
    let mine: Vec<_> = all.iter().filter(|id| ids.contains(*id)).collect();
    let distinct: HashSet<_> = mine.iter().collect();
    assert_eq!(mine.len(), 200, "every request issued");
    assert_eq!(distinct.len(), 200, "none issued twice");
    for id in &ids {
        assert_eq!(state_of(&h, id).await.state, RequestState::Done, "{id}");
    }
}

/// `CERT_MAX_ATTEMPTS` on the result path: a result after the last lease ended kills the
/// request, exactly as the queue consumer would.
pub async fn late_results_honour_the_configured_max_attempts(h: Harness) {
    let config = HttpConfig { max_attempts: 2, ..HttpConfig::default() };
    let h = h.configured(config).await;
    let app = h.app().await;
    h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(json!({"requestTimeoutInSecs": 1})))
        .await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "hank@example.com", None).await;
    let id = pair(&h, &access, &dev, "m-attempts").await;
    let late = json!({"errorCode": 9, "errorMessage": "late", "requestId": id});
    for attempt in 1..=2 {
        assert!(h.poll().await.login_certs.iter().any(|r| r.request_id == id), "lease {attempt}");
        h.clock.advance(Duration::from_secs(2));
        let r = h.post_issuance(late.clone()).await;
        if attempt < 2 {
            r.problem(409, codes::LEASE_ENDED);
        } else {
            r.problem(410, codes::REQUEST_DEAD);
        }
        let request = h.request(&id).await;
        assert_eq!(request.attempts, attempt);
        let expected = if attempt < 2 { RequestState::Pending } else { RequestState::Dead };
        assert_eq!(request.state, expected, "after lease {attempt} of 2");
    }
    assert_death_reported(&h, &app).await;
    assert!(
        h.poll().await.login_certs.iter().all(|r| r.request_id != id),
        "a dead request is not handed out"
    );
    // The leases' time-out messages come after it died: the one of the lease it died of sends
    // its dead letter, which the operators' alarm watches.
    let dispatcher = Dispatcher::new(h.backend.clone()).with_max_attempts(2);
    let mut timeouts = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while timeouts < 2 {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for the leases' time-outs");
        for message in h.backend.queue.receive(10, Duration::from_secs(30)).await.unwrap() {
            rp_shared::worker::MessageHandler::handle(&dispatcher, &message.body).await.unwrap();
            timeouts += QueueMessage::parse(&message.body).unwrap().into_leases().len();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let dead = h.backend.queue.dead_letters(10).await.unwrap();
    assert_eq!(dead.iter().filter(|m| m.body.contains(id.as_str())).count(), 1, "{dead:?}");
}

/// A dead-letter queue that loses the first dead letter sent to it.
struct LosingFirstDeadLetter {
    inner: Arc<dyn rp_shared::ports::Queue>,
    lost: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl rp_shared::ports::Queue for LosingFirstDeadLetter {
    async fn send(&self, body: &str, delay: Duration) -> Result<String, QueueError> {
        self.inner.send(body, delay).await
    }
    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.inner.receive(max, visibility).await
    }
    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        self.inner.ack(receipt).await
    }
    async fn dead_letter(&self, body: &str) -> Result<(), QueueError> {
        if !self.lost.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(QueueError::Unavailable("the dead letter was lost".into()));
        }
        self.inner.dead_letter(body).await
    }
    async fn dead_letters(&self, max: usize) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.inner.dead_letters(max).await
    }
}

/// A request dies, and sending its dead letter fails: the time-out message fails with it, and
/// its next delivery sends the dead letter (the request is not killed twice).
pub async fn a_lost_dead_letter_is_sent_when_the_time_out_comes_again(h: Harness) {
    let app = AppId::parse("appId", &h.app().await).unwrap();
    let request = CertRequest {
        machine_user_name: Some("ida@example.com".into()),
        device_id: Some("device-ida".into()),
        ..CertRequest::new(RequestKind::LoginCert, app.clone(), 300, EpochMillis(1_000))
    };
    let id = request.request_id.clone();
    queue(&h, &request).await;
    assert!(h.poll().await.login_certs.iter().any(|r| r.request_id == id));
    let lease = LeaseRef { request_id: id.clone(), lease_id: h.request(&id).await.lease_id.unwrap() };
    let message = QueueMessage::single(&lease).body();
    let losing = rp_shared::ports::Backend {
        queue: Arc::new(LosingFirstDeadLetter { inner: h.backend.queue.clone(), lost: Default::default() }),
        ..h.backend.clone()
    };
    let dispatcher = Dispatcher::new(losing).with_max_attempts(1);
    let handle = |body| rp_shared::worker::MessageHandler::handle(&dispatcher, body);
    assert!(handle(&message).await.is_err(), "the message fails with its dead letter");
    assert_eq!(h.request(&id).await.state, RequestState::Dead);
    let counts = Certificates::new(h.backend.store.as_ref()).queue_counts(&app, 10).await.unwrap();
    assert_eq!(counts.dead, 1);
    handle(&message).await.expect("delivered again");
    let dead = h.backend.queue.dead_letters(10).await.unwrap();
    let sent: Vec<_> = dead.iter().filter(|m| m.body.contains(id.as_str())).collect();
    assert_eq!(sent.len(), 1, "{dead:?}");
    assert_eq!(QueueMessage::parse(&sent[0].body).unwrap().into_leases(), [lease]);
    let counts = Certificates::new(h.backend.store.as_ref()).queue_counts(&app, 10).await.unwrap();
    assert_eq!(counts.dead, 1, "it died once");
}

/// Fair polling: app A floods the queue with 200 requests, then app B queues one. B's comes out
/// in the first poll (a global FIFO would hand it out after A's 200), the batch is still full,
/// and A's flood drains over the next polls. Once A's shard is empty and the grace period over,
/// its ready marker goes.
pub async fn a_flood_from_one_app_does_not_delay_another(h: Harness) {
    let flooder = AppId::parse("appId", &h.app().await).unwrap();
    for i in 0..200 {
        let request = CertRequest {
            machine_user_name: Some(format!("user{i}@example.com")),
            device_id: Some(format!("device-{i}")),
            ..CertRequest::new(RequestKind::LoginCert, flooder.clone(), 300, EpochMillis(1_000 + i))
        };
        queue(&h, &request).await;
    }
    let app_b = h.app().await;
    let access_b = h.access_token(&app_b).await;
    let dev = device(&h, &app_b, "bea@example.com", None).await;
    h.clock.advance(Duration::from_secs(1));
    let wanted = pair(&h, &access_b, &dev, "m-fair").await;

    let first = h.poll().await.login_certs;
    assert!(first.iter().any(|r| r.request_id == wanted), "B's request is in the first poll");
    assert_eq!(first.len(), rp_shared::repo::certificates::DEFAULT_BATCH, "the batch is full");
    let mut drained = first.len() - 1;
    for _ in 0..5 {
        drained += h.poll().await.login_certs.len();
    }
    assert_eq!(drained, 200, "A's flood drains over the next polls, each request once");

    let ready = |h: &Harness| {
        let store = h.backend.store.clone();
        async move {
            let markers = store.query(Query::table(READY_APPS)).await.unwrap();
            markers.items.iter().map(|i| i.key.sk.clone()).collect::<Vec<_>>()
        }
    };
    assert!(ready(&h).await.contains(&flooder.as_str().to_owned()), "kept within the grace period");
    h.clock.advance(Duration::from_secs(READY_GRACE_SECS as u64));
    assert!(h.poll().await.login_certs.is_empty());
    // B's marker stays to its grace period's last second; A's, a second older, is past it.
    let kept = ready(&h).await;
    assert!(kept.contains(&app_b) && !kept.contains(&flooder.as_str().to_owned()), "{kept:?}");
    h.clock.advance(Duration::from_secs(1));
    assert!(h.poll().await.login_certs.is_empty());
    let left = ready(&h).await;
    assert!(!left.contains(&flooder.as_str().to_owned()) && !left.contains(&app_b), "{left:?}");
}

/// Drained apps keep their ready marker for a grace period; a poll whose page of markers is
/// all such apps reads the next page instead of coming back empty.
pub async fn a_small_batch_skips_apps_drained_within_the_grace_period(h: Harness) {
    let config = HttpConfig { poll_batch: 1, ..HttpConfig::default() };
    let h = h.configured(config).await;
    for i in 0..3 {
        queue_drained(&h, i).await;
        assert_eq!(h.poll().await.login_certs.len(), 1, "app {i} drained");
    }
    let waiting = AppId::parse("appId", &h.app().await).unwrap();
    let request = CertRequest::new(RequestKind::LoginCert, waiting, 300, EpochMillis(2_000));
    queue(&h, &request).await;
    let polled = h.poll().await.login_certs;
    assert_eq!(polled.len(), 1, "the waiting app's request, past three drained apps");
    assert_eq!(polled[0].request_id, request.request_id);
}

/// A poll's first round reads each ready app's part of twice the batch; when the others come up
/// short, a second round fills the batch from the app that has more.
pub async fn a_poll_fills_its_batch_from_an_app_with_more(h: Harness) {
    let h = h.configured(HttpConfig { poll_batch: 4, ..HttpConfig::default() }).await;
    // Three apps drained within the grace period: their markers stay, their shards are empty.
    for i in 0..3 {
        queue_drained(&h, i).await;
    }
    assert_eq!(h.poll().await.login_certs.len(), 3);
    let flooder = AppId::parse("appId", &h.app().await).unwrap();
    let mut ids = Vec::new();
    for i in 0..10 {
        let request = CertRequest::new(RequestKind::LoginCert, flooder.clone(), 300, EpochMillis(2_000 + i));
        ids.push(request.request_id.clone());
        queue(&h, &request).await;
    }
    // The console's count of them stops at its cap, and says there may be more (DynamoDB says
    // so at a page of exactly the cap too: 11 reads all 10).
    let certs = rp_shared::repo::certificates::Certificates::new(h.backend.store.as_ref());
    let app = &flooder;
    let counted = |cap| async move {
        let counts = certs.queue_counts(app, cap).await.unwrap();
        (counts.pending_logins, counts.more)
    };
    assert_eq!((counted(4).await, counted(11).await), ((4, true), (10, false)));
    // Four markers, so two reads each: the flooder's two, then two more in a second round.
    let polled: Vec<_> = h.poll().await.login_certs.into_iter().map(|r| r.request_id).collect();
    assert_eq!(polled, ids[..4], "the flooder's oldest four: the batch is full");
}

/// Polls take the ready apps in turn: with more apps waiting than a batch has places, the next
/// poll starts after the last app the previous one served, wrapping around, so no app waits
/// behind the first ones' backlogs.
pub async fn polls_take_the_ready_apps_in_turn(h: Harness) {
    let h = h.configured(HttpConfig { poll_batch: 2, ..HttpConfig::default() }).await;
    let mut apps = Vec::new();
    for _ in 0..3 {
        apps.push(AppId::parse("appId", &h.app().await).unwrap());
    }
    // The markers' order: by app id.
    apps.sort();
    let mut app_of = std::collections::HashMap::new();
    for (a, app) in apps.iter().enumerate() {
        for i in 0..3 {
            let request = CertRequest::new(RequestKind::LoginCert, app.clone(), 300, EpochMillis(1_000 + i));
            app_of.insert(request.request_id.clone(), a);
            queue(&h, &request).await;
        }
    }
    let mut served = Vec::new();
    for _ in 0..3 {
        let polled = h.poll().await.login_certs;
        let mut of: Vec<usize> = polled.iter().map(|r| app_of[&r.request_id]).collect();
        of.sort();
        served.push(of);
    }
    assert_eq!(served, [[0, 1], [0, 2], [1, 2]], "the first two apps, then the third and the first, ...");
}

/// The per-app cap: past `CERT_MAX_OPEN_PER_APP` open login-certificate requests a pairing is
/// refused with 429 and nothing is written; a settled request frees its place, and another
/// app is never affected.
pub async fn an_app_at_its_cap_cannot_queue_more(h: Harness) {
    let config = HttpConfig { max_open_per_app: 2, ..HttpConfig::default() };
    let h = h.configured(config).await;
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let mut ids = Vec::new();
    for i in 0..2 {
        let dev = device(&h, &app, &format!("capped{i}@example.com"), None).await;
        ids.push(pair(&h, &access, &dev, &format!("m-cap-{i}")).await);
    }
    let third = device(&h, &app, "capped2@example.com", None).await;
    enroll(&h, &access, &app, &third.user, "m-cap-2").await;
    let body = json!({"machineId": "m-cap-2", "deviceId": third.device_id, "machineUserNameWS": third.user});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body.clone())).await;
    r.problem(429, codes::CERT_QUEUE_FULL);
    assert!(r.header("retry-after").is_some());
    let path = format!("/rp/api/client/reg?machineId=m-cap-2&deviceId={}", third.device_id);
    let read = h.client.send("GET", &path, Some(&access), None).await;
    read.problem(404, codes::PAIRING_NOT_FOUND);

    // Another app is not held up by this one's cap.
    let other = h.app().await;
    let other_access = h.access_token(&other).await;
    let dev = device(&h, &other, "free@example.com", None).await;
    pair(&h, &other_access, &dev, "m-free").await;

    // A lease is still open; a settled request frees its place.
    let leased = h.poll().await.login_certs;
    assert!(ids.iter().all(|id| leased.iter().any(|r| &r.request_id == id)));
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body.clone())).await;
    r.problem(429, codes::CERT_QUEUE_FULL);
    let failed = json!({"errorCode": 7, "errorMessage": "CA offline", "requestId": ids[0]});
    assert_eq!(h.post_issuance(failed.clone()).await.status, 204);
    assert_eq!(h.post_issuance(failed).await.status, 204, "a repeated result frees nothing more");
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body.clone())).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let fourth = device(&h, &app, "capped3@example.com", None).await;
    enroll(&h, &access, &app, &fourth.user, "m-cap-3").await;
    let body =
        json!({"machineId": "m-cap-3", "deviceId": fourth.device_id, "machineUserNameWS": fourth.user});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body.clone())).await;
    r.problem(429, codes::CERT_QUEUE_FULL);
    // A settled revocation frees no place: revocations never take one.
    let app_id = AppId::parse("appId", &app).unwrap();
    let revocation = CertRequest {
        cert_serial_number: Some("5e01".into()),
        ..CertRequest::new(RequestKind::Revocation, app_id, 300, h.clock.now_millis())
    };
    queue(&h, &revocation).await;
    let polled = h.poll().await.revoked_certs;
    assert!(polled.iter().any(|r| r.request_id == revocation.request_id), "{polled:?}");
    let failed = json!({"errorCode": 1, "errorMessage": "CA offline", "requestId": revocation.request_id});
    assert_eq!(h.post_revocation(failed).await.status, 204);
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body.clone())).await;
    r.problem(429, codes::CERT_QUEUE_FULL);

    // An app's own cap replaces the deployment's, larger or smaller.
    let set_cap = |app: String, cap: u32| {
        let h = &h;
        async move {
            let limits = json!({"limit": 120, "windowSecs": 60, "maxOpenCertificateRequests": cap});
            let r = h.admin("PUT", &format!("/cc/api/apps/{app}/rate-limit"), Some(limits)).await;
            assert_eq!(r.json()["maxOpenCertificateRequests"], cap);
        }
    };
    set_cap(app.clone(), 3).await;
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body)).await;
    assert_eq!(r.status, 201, "a place under the app's own cap: {}", r.json());
    set_cap(other.clone(), 1).await;
    let dev = device(&h, &other, "second@example.com", None).await;
    enroll(&h, &other_access, &other, &dev.user, "m-second").await;
    let body = json!({"machineId": "m-second", "deviceId": dev.device_id, "machineUserNameWS": dev.user});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&other_access), Some(body)).await;
    r.problem(429, codes::CERT_QUEUE_FULL);
}

/// A pairing that read a free place in its app's queue but lost it to another before its write
/// is refused as the queue being full (429), as it would be had it read the queue after, and
/// leaves nothing behind.
pub async fn a_pairing_that_loses_the_last_place_is_told_the_queue_is_full(h: Harness) {
    use rp_shared::domain::pairing::NewPairing;
    use rp_shared::domain::tokens::TokenSecret;
    use rp_shared::http::wire::pairing::PairRequest;
    let capped = HttpConfig { max_open_per_app: 1, ..HttpConfig::default() };
    let h = h.configured(capped.clone()).await;
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let (late, first) =
        (device(&h, &app, "late@example.com", None).await, device(&h, &app, "first@example.com", None).await);
    enroll(&h, &access, &app, &late.user, "m-late").await;
    let body = json!({"machineId": "m-late", "deviceId": late.device_id, "machineUserNameWS": late.user});
    let request = NewPairing::try_from(serde_json::from_value::<PairRequest>(body).unwrap()).unwrap();
    let owner = TokenSecret::parse(&access).unwrap().hash().token_id();
    let app_id = AppId::parse("appId", &app).unwrap();
    let (gate, held) = h
        .held(move |held| async move {
            let held = AppState { config: std::sync::Arc::new(capped), ..held };
            rp_shared::app::pairing::pair(&held, &app_id, &owner, request).await.map(|_| ()).map_err(|e| {
                let problem = rp_shared::http::problem::Problem::from(e);
                (problem.status().as_u16(), problem.code())
            })
        })
        .await;
    pair(&h, &access, &first, "m-first").await;
    gate.open(true);
    assert_eq!(held.await.unwrap(), Err((429, codes::CERT_QUEUE_FULL)));
    let path = format!("/rp/api/client/reg?machineId=m-late&deviceId={}", late.device_id);
    h.client.send("GET", &path, Some(&access), None).await.problem(404, codes::PAIRING_NOT_FOUND);
}

/// The poll's `machineUserNameWS` is a string filled from what the server knows: the pairing's
/// own name, else the name the machine enrolled under (the seed types it as a string).
pub async fn the_poll_names_the_workstation_user_from_what_is_known(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "pia@example.com", Some("CORP\\pia")).await;
    // Enrolled as CORP\pia; paired without a name.
    let r = enroll_as(&h, &access, &app, "CORP\\pia", "pia@example.com", "m-named", json!({})).await;
    assert_eq!(r.status, 200, "{}", r.json());
    let pair = json!({"machineId": "m-named", "deviceId": dev.device_id});
    let r = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(pair)).await;
    assert_eq!(r.status, 201, "{}", r.json());
    let id = r.json()["certificateRequestId"].as_str().unwrap().to_owned();
    let poll = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    let mine = poll["loginCerts"].as_array().unwrap().iter().find(|r| r["requestId"] == id.as_str()).cloned();
    assert_eq!(mine.expect("leased")["machineUserNameWS"], "CORP\\pia");
    assert!(
        poll["loginCerts"].as_array().unwrap().iter().all(|r| r["machineUserNameWS"].is_string()),
        "{poll}"
    );
}

/// The reference agent reports a failed issuance with the request's app, which the poll names
/// beside the seed's fields; an agent that names only the request gets its event filed under
/// the request's app too.
pub async fn an_agents_failure_events_are_filed_under_the_requests_app(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "quin@example.com", None).await;
    enroll(&h, &access, &app, "quin@example.com", "m-fail").await;
    let id = pair(&h, &access, &dev, "m-fail").await;
    let poll = h.admin("GET", "/rp/api/certificate/requests", None).await.json();
    let mine = poll["loginCerts"].as_array().unwrap().iter().find(|r| r["requestId"] == id.as_str()).cloned();
    assert_eq!(mine.as_ref().expect("leased")["appId"], app.as_str(), "{poll}");
    assert_eq!(mine.expect("leased")["certificateValidityDays"], 90, "the app's default validity");
    let failed = json!({"errorCode": 17, "errorMessage": "the CA is down", "requestId": id});
    assert_eq!(h.post_issuance(failed).await.status, 204);
    for (name, named) in
        [("WORKSTATION_CERTIFICATE_ISSUED", false), ("WORKSTATION_CERTIFICATE_REVOKED", true)]
    {
        // `reportedBy` tells this event from the one the server filed with the failed result.
        let mut event = json!({"name": name, "attributes":
            {"isSuccessful": false, "errorCode": 17, "requestId": id, "reportedBy": "the agent"}});
        if named {
            event["appId"] = json!(app);
        }
        let r = h.admin("POST", "/rp/api/events", Some(event)).await;
        assert_eq!(r.status, 201, "{}", r.json());
        let listed = h.admin("GET", &format!("/rp/api/events?appId={app}&name={name}"), None).await.json();
        let found = listed["events"].as_array().unwrap().iter().any(|e| {
            e["attributes"]["requestId"] == id.as_str() && e["attributes"]["reportedBy"] == "the agent"
        });
        assert!(found, "{name} is filed under the app: {listed}");
    }
    // An event naming no request, or an unknown one, stays without an app.
    let event =
        json!({"name": "WORKSTATION_CERTIFICATE_ISSUED", "attributes": {"requestId": "no-such-request"}});
    let r = h.admin("POST", "/rp/api/events", Some(event)).await;
    assert_eq!(r.status, 201, "{}", r.json());
}

/// Queues `request` as a pairing would (request, ready marker, open count), without the
/// pairing: for floods too large to build through the API.
/// Queues one request of a new app (the `i`th), for a poll to drain.
async fn queue_drained(h: &Harness, i: i64) {
    let app = AppId::parse("appId", &h.app().await).unwrap();
    let request = CertRequest {
        device_id: Some(format!("drained-{i}")),
        ..CertRequest::new(RequestKind::LoginCert, app, 300, EpochMillis(1_000 + i))
    };
    queue(h, &request).await;
}

async fn queue(h: &Harness, request: &CertRequest) {
    let ops = enqueue_ops(request, u32::MAX, h.clock.now_millis()).unwrap();
    h.backend.store.transact(ops).await.unwrap();
}

/// The app's issuance event says its request died.
async fn assert_death_reported(h: &Harness, app: &str) {
    let events = h
        .admin("GET", &format!("/rp/api/events?appId={app}&name=WORKSTATION_CERTIFICATE_ISSUED"), None)
        .await
        .json();
    assert_eq!(
        events["events"][0]["attributes"]["errorCode"],
        rp_shared::domain::certificates::DEAD_ERROR_CODE
    );
}

/// 50 agents post results for 50 different requests, all with one serial: exactly one is kept.
pub async fn racing_results_with_one_serial_store_it_once(h: Harness) {
    let Some(h) = h.for_races() else { return };
    let app = AppId::parse("appId", &h.app().await).unwrap();
    for i in 0..50 {
        let request = CertRequest {
            machine_user_name: Some(format!("user{i}@example.com")),
            device_id: Some(format!("device-{i}")),
            ..CertRequest::new(RequestKind::LoginCert, app.clone(), 300, EpochMillis(1_000 + i))
        };
        queue(&h, &request).await;
    }
    let leased = h.poll().await.login_certs;
    assert_eq!(leased.len(), 50);
    let serial = format!("5e{}", uuid::Uuid::new_v4().simple());
    let racers: Vec<_> = leased
        .into_iter()
        .map(|request| {
            let client = h.client.clone();
            let admin = h.admin.clone();
            let body = json!({
                "errorCode": 0, "errorMessage": "", "requestId": request.request_id,
                "issuerKeyAgreementPublicKey": "a2V5", "issuerKeyAgreementPublicKeyAuth": "YXV0aA==",
                "loginCert": "c2VhbGVk", "loginCertAuth": "YXV0aA==", "loginCertSerialNumber": serial,
                "loginCertExpiryDate": 1_900_000_000_000_i64, "ivLoginCert": "aXY=", "signingCert": "Y2E=",
                "machineUserNameWS": "", "machineUserNames": [],
            });
            tokio::spawn(async move {
                let r = client.send("POST", "/rp/api/certificate", Some(&admin), Some(body)).await;
                (r.status.as_u16(), r.json()["errorCode"].as_u64())
            })
        })
        .collect();
    let outcomes = super::joined(racers).await;
    let kept = outcomes.iter().filter(|(status, _)| *status == 204).count();
    let refused = outcomes.iter().filter(|o| **o == (409, Some(u64::from(codes::SERIAL_TAKEN)))).count();
    assert_eq!((kept, refused), (1, 49), "{outcomes:?}");
}

/// The same result posted twice at once (DECISIONS §3: stored once, both 204), in the
/// interleaving that made the second a 409: it read the request before the first result was
/// stored and the certificate after, so it saw its own serial taken. Replayed exactly here, then
/// raced for real: 60 identical results, 20 at a time.
pub async fn identical_results_racing_are_each_answered_204(h: Harness) {
    use rp_shared::app::certificates::{settle, settle_reads};
    use rp_shared::domain::certificates::CertResult;
    use rp_shared::http::wire::certificates::IssuanceResult;
    let app = AppId::parse("appId", &h.app().await).unwrap();
    let request = CertRequest {
        machine_user_name: Some("lee@example.com".into()),
        device_id: Some("device-lee".into()),
        ..CertRequest::new(RequestKind::LoginCert, app.clone(), 300, EpochMillis(1_000))
    };
    queue(&h, &request).await;
    let leased = h.poll().await.login_certs;
    let mine = leased.iter().find(|r| r.request_id == request.request_id).expect("leased");
    let body = |serial: &str| {
        json!({
            "errorCode": 0, "errorMessage": "", "requestId": mine.request_id,
            "issuerKeyAgreementPublicKey": "a2V5", "issuerKeyAgreementPublicKeyAuth": "YXV0aA==",
            "loginCert": "c2VhbGVk", "loginCertAuth": "YXV0aA==", "loginCertSerialNumber": serial,
            "loginCertExpiryDate": 1_900_000_000_000_i64, "ivLoginCert": "aXY=", "signingCert": "Y2E=",
            "machineUserNameWS": "", "machineUserNames": [],
        })
    };
    let serial = format!("5e{}", uuid::Uuid::new_v4().simple());
    let parsed: IssuanceResult = serde_json::from_value(body(&serial)).unwrap();
    let result = CertResult::try_from(parsed).unwrap();
    let state = AppState::new(h.backend.clone(), HttpConfig::default());
    let (stale_request, _) = settle_reads(&state, &result).await;
    settle(&state, "agent-a", &result, settle_reads(&state, &result).await)
        .await
        .expect("the first is stored");
    let (_, fresh_cert) = settle_reads(&state, &result).await;
    assert!(fresh_cert.as_ref().unwrap().is_some(), "the certificate is stored");
    let second = settle(&state, "agent-b", &result, (stale_request, fresh_cert)).await;
    assert!(second.is_ok(), "the same result again is stored once and answered as stored: {second:?}");

    // For real: a second request, its identical result posted 60 times, 20 at once.
    let Some(h) = h.for_races() else { return };
    let request = CertRequest {
        machine_user_name: Some("lee@example.com".into()),
        device_id: Some("device-lee".into()),
        ..CertRequest::new(RequestKind::LoginCert, app, 300, EpochMillis(2_000))
    };
    queue(&h, &request).await;
    let leased = h.poll().await.login_certs;
    let again = leased.iter().find(|r| r.request_id == request.request_id).expect("leased").clone();
    let serial = format!("5e{}", uuid::Uuid::new_v4().simple());
    let mut body = body(&serial);
    body["requestId"] = json!(again.request_id);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let racers: Vec<_> = (0..20)
            .map(|_| {
                let (client, admin, body) = (h.client.clone(), h.admin.clone(), body.clone());
                tokio::spawn(async move {
                    client.send("POST", "/rp/api/certificate", Some(&admin), Some(body)).await.status.as_u16()
                })
            })
            .collect();
        for racer in racers {
            statuses.push(racer.await.unwrap());
        }
    }
    assert!(statuses.iter().all(|s| *s == 204), "{statuses:?}");
}

/// Two agents, one request: A's lease ends, B leases it again, and A's late result still comes
/// first. The server keeps the first valid result, whichever lease it came under, and refuses
/// B's (409), whose certificate B's agent must then revoke (see the next test).
pub async fn the_first_valid_result_wins_whichever_lease(h: Harness) {
    let app = h.app().await;
    h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(json!({"requestTimeoutInSecs": 1})))
        .await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "uma@example.com", None).await;
    let id = pair(&h, &access, &dev, "m-race").await;
    let result = |serial: &str| {
        json!({
            "errorCode": 0, "errorMessage": "", "requestId": id,
            "issuerKeyAgreementPublicKey": "a2V5", "issuerKeyAgreementPublicKeyAuth": "YXV0aA==",
            "loginCert": "c2VhbGVk", "loginCertAuth": "YXV0aA==", "loginCertSerialNumber": serial,
            "loginCertExpiryDate": 1_900_000_000_000_i64, "ivLoginCert": "aXY=", "signingCert": "Y2E=",
            "machineUserNameWS": "", "machineUserNames": [],
        })
    };
    assert!(h.poll().await.login_certs.iter().any(|r| r.request_id == id), "agent A leases it");
    let lease_a = h.request(&id).await.lease_id.unwrap();
    h.clock.advance(Duration::from_secs(2));
    Dispatcher::new(h.backend.clone()).lease_expired(&id, &lease_a).await.unwrap();
    assert!(h.poll().await.login_certs.iter().any(|r| r.request_id == id), "agent B leases it again");
    assert_eq!(h.post_issuance(result("0a01")).await.status, 204, "A's late result is the first valid one");
    h.post_issuance(result("0b02")).await.problem(409, codes::RESULT_DIFFERS);
    assert_eq!(h.request(&id).await.cert_serial_number.as_deref(), Some("0a01"));
}

/// The workstation sees its pairing's login certificate: pending, then issued (serial, expiry,
/// the issuing CA's certificate), then revoked; another workstation of the app sees none of it.
pub async fn the_workstation_sees_its_pairings_certificate(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "uma@example.com", None).await;
    let id = pair(&h, &access, &dev, "m-view").await;
    let path = format!("/rp/api/client/reg?machineId=m-view&deviceId={}", dev.device_id);
    let view = |token: String| {
        let (h, path) = (&h, path.clone());
        async move {
            let r = h.client.send("GET", &path, Some(&token), None).await;
            assert_eq!(r.status, 200, "{}", r.json());
            r.json()
        }
    };
    let seen = view(access.clone()).await;
    assert_eq!(seen["certificate"]["state"], "pending", "{seen}");
    assert_eq!(seen["certificate"]["certificateRequestId"], id.as_str());
    assert!(seen["certificate"]["certSerialNumber"].is_null());
    let (agent, ca, _server) = agent_for(&h).await;
    assert!(agent.run_once().await.unwrap().issued.contains(&id));
    let seen = view(access.clone()).await["certificate"].clone();
    assert_eq!(seen["state"], "issued", "{seen}");
    let serial = seen["certSerialNumber"].as_str().expect("its serial").to_owned();
    assert!(seen["expiresAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(seen["issuerCertificate"], STANDARD.encode(ca.certificate_der()));
    let text = seen.to_string();
    assert!(!text.contains("PRIVATE") && !text.contains("loginCert\""), "no key material: {text}");
    // Another workstation of the app reads the pairing without it.
    let other = h.access_token(&app).await;
    assert!(view(other).await.get("certificate").is_none());
    // Revoked by an admin, through the agent: shown revoked from the moment it is queued.
    let r = h.admin("POST", &format!("/cc/api/certificates/{serial}/revoke"), None).await;
    assert_eq!(r.status, 202, "{}", r.json());
    assert_eq!(view(access.clone()).await["certificate"]["state"], "revoked");
    assert_eq!(agent.run_once().await.unwrap().revoked.len(), 1);
    assert_eq!(view(access).await["certificate"]["state"], "revoked");
}

/// The login certificate (PEM) a device's `GET /rp/versioned/device/certificates` holds for it,
/// opened as the device opens it.
async fn issued_pem(h: &Harness, dev: &TestDevice) -> (String, String) {
    let r = h.client.send("GET", "/rp/versioned/device/certificates", Some(&dev.token), None).await.json();
    let c = &r["certificates"][0];
    let signing_cert = STANDARD.decode(c["signingCert"].as_str().unwrap()).unwrap();
    let bundle =
        envelope::open(&dev.agreement, &envelope_of(c), &binding_of(c), &issuer_key(&signing_cert)).unwrap();
    let bundle = String::from_utf8(bundle).unwrap();
    let end = bundle.find("-----END CERTIFICATE-----").unwrap() + "-----END CERTIFICATE-----".len();
    (bundle[..end].to_owned() + "\n", c["certSerialNumber"].as_str().unwrap().to_owned())
}

fn pem(label: &str, der: &[u8]) -> String {
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", STANDARD.encode(der))
}

/// A CA directory whose `revoked.json` lists `count` serials (revoked now, expiry unknown), and
/// its CRL: the agent's own format and signature, at the size of a large fleet's.
pub fn ca_with_revocations(dir: &std::path::Path, count: usize) -> (LocalCa, Vec<u8>) {
    let _ = LocalCa::open_or_create(dir).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let revoked: serde_json::Map<String, serde_json::Value> =
        (0..count).map(|i| (format!("7e{i:030x}"), json!(now))).collect();
    // The CRL number the directory holds, so that each CRL is numbered above the last.
    let number = std::fs::read(dir.join("revoked.json"))
        .map(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).unwrap()["crlNumber"].clone())
        .unwrap_or(json!(0));
    let state = json!({"revoked": revoked, "crlNumber": number});
    std::fs::write(dir.join("revoked.json"), state.to_string()).unwrap();
    let ca = LocalCa::open_or_create(dir).unwrap();
    let (crl, _) = ca.crl(Duration::from_secs(3600)).unwrap();
    (ca, crl)
}

/// A CRL larger than the store keeps in one item (DynamoDB's 400 KB) is published whole and
/// served byte for byte; a smaller one after it replaces it whole, with nothing of the larger
/// one left over, and then the largest the API takes (about 2.8 MB: its base64 and parts fill
/// most of the request and of one transaction).
pub async fn a_crl_larger_than_one_item_is_published_whole(h: Harness) {
    let dir = tempfile::tempdir().unwrap();
    let (ca, large) = ca_with_revocations(dir.path(), 13_000);
    assert!(large.len() > 420_000, "{} bytes", large.len());
    let (path, ca_der) = (format!("/rp/pki/{}/crl", ca.id()), ca.certificate_der().to_vec());
    drop(ca);
    let upload = |crl: &[u8]| json!({"crl": STANDARD.encode(crl), "caCertificate": STANDARD.encode(&ca_der)});
    let smaller = ca_with_revocations(dir.path(), 10).1;
    let largest = ca_with_revocations(dir.path(), 79_000).1;
    let max = rp_shared::domain::pki::MAX_CRL_BYTES;
    assert!((max - 100_000..=max).contains(&largest.len()), "{} bytes", largest.len());
    for crl in [large, smaller, largest] {
        let put = h.admin("PUT", &path, Some(upload(&crl))).await;
        assert_eq!(put.status, 200, "{} bytes: {}", crl.len(), put.text());
        let got = h.client.send("GET", &path, None, None).await;
        assert_eq!(got.status, 200, "{}", got.text());
        assert!(
            got.body.as_ref() == crl.as_slice(),
            "{} bytes published, {} served",
            crl.len(),
            got.body.len()
        );
    }
}

/// The agent publishes its CA's CRL at the URL its certificates name, on its first pass and after
/// every revocation; the server keeps only newer CRLs signed by that CA. `openssl verify
/// -crl_check` (no code of this project) then refuses the revoked certificate and accepts the
/// other.
pub async fn a_revoked_certificate_fails_against_the_published_crl(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let (gina, hank) =
        (device(&h, &app, "gina@example.com", None).await, device(&h, &app, "hank@example.com", None).await);
    pair(&h, &access, &gina, "m-crl-1").await;
    pair(&h, &access, &hank, "m-crl-2").await;
    let (agent, ca, _server) = agent_for(&h).await;
    let first = agent.run_once().await.unwrap();
    assert_eq!(first.issued.len(), 2, "{first:?}");
    let first_number = first.crl.expect("the first pass publishes a CRL");
    let (crl_path, ca_path) = (format!("/rp/pki/{}/crl", ca.id()), format!("/rp/pki/{}/ca.crt", ca.id()));
    let empty = h.client.send("GET", &crl_path, None, None).await;
    assert_eq!(empty.status, 200);
    let (revoked_pem, serial) = issued_pem(&h, &gina).await;
    let (good_pem, _) = issued_pem(&h, &hank).await;

    let r = h.admin("POST", &format!("/cc/api/certificates/{serial}/revoke"), None).await;
    assert_eq!(r.status, 202, "{}", r.json());
    let second = agent.run_once().await.unwrap();
    assert_eq!(second.revoked.len(), 1, "{second:?}");
    assert!(second.crl.expect("a revocation publishes the CRL") > first_number);
    // Nothing revoked and within the refresh interval: no new CRL.
    assert_eq!(agent.run_once().await.unwrap().crl, None);

    let crl = h.client.send("GET", &crl_path, None, None).await;
    assert_eq!(crl.status, 200);
    assert_eq!(crl.header("content-type"), Some("application/pkix-crl"));
    let cache = crl.header("cache-control").unwrap().to_owned();
    assert_eq!(cache, "public, max-age=3600", "an hour at most: the CRL is valid for two");
    let ca_cert = h.client.send("GET", &ca_path, None, None).await;
    assert_eq!(
        (ca_cert.status.as_u16(), ca_cert.header("content-type")),
        (200, Some("application/pkix-cert"))
    );
    assert_eq!(ca_cert.body, ca.certificate_der());

    // What the server refuses: an older CRL, a tampered one, another CA's certificate, a bad
    // id, a caller that is not a global admin; the same CRL again is fine.
    let upload = |crl: &[u8], ca_der: &[u8]| json!({"crl": STANDARD.encode(crl), "caCertificate": STANDARD.encode(ca_der)});
    h.admin("PUT", &crl_path, Some(upload(&empty.body, ca.certificate_der())))
        .await
        .problem(409, codes::CRL_OUTDATED);
    assert_eq!(h.admin("PUT", &crl_path, Some(upload(&crl.body, ca.certificate_der()))).await.status, 200);
    let mut tampered = crl.body.to_vec();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    let r = h.admin("PUT", &crl_path, Some(upload(&tampered, ca.certificate_der()))).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "crl");
    let other = LocalCa::open_or_create(&h.scratch_dir()).unwrap();
    let r = h.admin("PUT", &crl_path, Some(upload(&crl.body, other.certificate_der()))).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "caCertificate");
    let r = h.admin("PUT", "/rp/pki/NOT-AN-ID/crl", Some(upload(&crl.body, ca.certificate_der()))).await;
    assert_eq!(r.problem(400, codes::INVALID_FIELD)["field"], "caId");
    let r =
        h.client.send("PUT", &crl_path, Some(&access), Some(upload(&crl.body, ca.certificate_der()))).await;
    assert!(matches!(r.status.as_u16(), 401 | 403), "{}", r.text());
    h.client
        .send("GET", "/rp/pki/0123456789abcdef/crl", None, None)
        .await
        .problem(404, codes::CA_NOT_PUBLISHED);
    h.client
        .send("GET", "/rp/pki/0123456789abcdef/ca.crt", None, None)
        .await
        .problem(404, codes::CA_NOT_PUBLISHED);
    // Past its nextUpdate the CRL is still served, for no cache to keep.
    h.clock.advance(Duration::from_secs(3 * 3600));
    let stale = h.client.send("GET", &crl_path, None, None).await;
    assert_eq!((stale.status.as_u16(), stale.header("cache-control")), (200, Some("public, max-age=0")));

    if std::process::Command::new("openssl").arg("version").output().is_err() {
        eprintln!("skipped the openssl check: no openssl on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (ca_file, crl_file) =
        (write("ca.pem", &pem("CERTIFICATE", &ca_cert.body)), write("crl.pem", &pem("X509 CRL", &crl.body)));
    let verify = |cert: &str| {
        let out = std::process::Command::new("openssl")
            .args([
                "verify",
                "-crl_check",
                "-CAfile",
                &ca_file,
                "-CRLfile",
                &crl_file,
                &write("cert.pem", cert),
            ])
            .output()
            .unwrap();
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    };
    let (ok, text) = verify(&good_pem);
    assert!(ok && text.contains("OK"), "the good certificate verifies with the CRL: {text}");
    let (ok, text) = verify(&revoked_pem);
    assert!(!ok && text.contains("certificate revoked"), "the revoked certificate fails: {text}");
}

/// A certificate in the last fifth of its life gets a renewal for its pairing, one at a time,
/// however many sweeps run; once the new one is stored the workstation sees it and the old one
/// is revoked. A pairing ended while its renewal is under way takes the new certificate along.
pub async fn a_certificate_near_its_end_is_renewed_and_replaces_the_old_one(h: Harness) {
    use rp_shared::app::renewal::sweep;
    let app = h.app().await;
    let settings = json!({"certificateValidityDays": 1});
    assert_eq!(h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(settings)).await.status, 200);
    let access = h.access_token(&app).await;
    let (ada, bo) =
        (device(&h, &app, "ada@example.com", None).await, device(&h, &app, "bo@example.com", None).await);
    let first = pair(&h, &access, &ada, "m-renew-1").await;
    pair(&h, &access, &bo, "m-renew-2").await;
    let (agent, _ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 2);
    let view_path = format!("/rp/api/client/reg?machineId=m-renew-1&deviceId={}", ada.device_id);
    let view = || async {
        h.client.send("GET", &view_path, Some(&access), None).await.json()["certificate"].clone()
    };
    let old = view().await;
    assert_eq!(
        (old["state"].as_str(), old["certificateRequestId"].as_str()),
        (Some("issued"), Some(first.as_str()))
    );
    let old_serial = old["certSerialNumber"].as_str().unwrap().to_owned();
    let bo_old = Certificates::new(h.backend.store.as_ref())
        .all_of_device(&AppId::parse("appId", &app).unwrap(), &bo.device_id)
        .await
        .unwrap();
    let bo_old_serial = bo_old[0].cert_serial_number.clone();

    // A day's certificate is due after about 19.2 hours.
    let state = AppState::new(h.backend.clone(), HttpConfig::default());
    h.clock.advance(Duration::from_secs(18 * 3600));
    assert_eq!(sweep(&state).await, 0, "not due yet");
    h.clock.advance(Duration::from_secs(2 * 3600));
    let (a, b) = tokio::join!(sweep(&state), sweep(&state));
    assert_eq!(a + b, 2, "one renewal for each certificate, whichever sweep queued it");
    assert_eq!(sweep(&state).await, 0, "one open renewal at a time");

    // Bo's workstation unpairs while its renewal waits for the agent.
    let bo_path = format!("/rp/api/client/reg?machineId=m-renew-2&deviceId={}", bo.device_id);
    assert_eq!(h.client.send("DELETE", &bo_path, Some(&access), None).await.status, 204);
    let pass = agent.run_once().await.unwrap();
    assert_eq!((pass.issued.len(), pass.revoked.len()), (2, 1), "{pass:?}");
    let renewed = view().await;
    assert_eq!(renewed["state"], "issued", "{renewed}");
    assert_ne!(renewed["certificateRequestId"], first.as_str());
    let new_serial = renewed["certSerialNumber"].as_str().unwrap().to_owned();
    assert_ne!(new_serial, old_serial);
    let renewal = h.request(renewed["certificateRequestId"].as_str().unwrap()).await;
    assert_eq!(renewal.renews.as_deref(), Some(old_serial.as_str()));
    assert_ne!(renewal.enc_counter, h.request(&first).await.enc_counter, "a fresh encryption counter");

    // The next pass revokes Ada's old certificate, and Bo's new one.
    let pass = agent.run_once().await.unwrap();
    assert_eq!(pass.revoked.len(), 2, "{pass:?}");
    let certs = Certificates::new(h.backend.store.as_ref());
    let (old, _) = certs.by_serial(&old_serial).await.unwrap().unwrap();
    assert!(old.revoked_at.is_some());
    assert_eq!(old.renewed_by.as_deref(), Some(new_serial.as_str()));
    let (new, _) = certs.by_serial(&new_serial).await.unwrap().unwrap();
    assert!(new.revoked_at.is_none() && new.renewal_request_id.is_none());
    let bo_certs = certs.all_of_device(&AppId::parse("appId", &app).unwrap(), &bo.device_id).await.unwrap();
    assert_eq!(bo_certs.len(), 2);
    assert!(bo_certs.iter().all(|c| c.revoked_at.is_some()), "{bo_certs:?}");
    assert!(bo_certs.iter().any(|c| c.cert_serial_number == bo_old_serial));
    // Nothing more to renew until the new certificate's own window.
    assert_eq!(sweep(&state).await, 0);
    assert_eq!(view().await["state"], "issued");
}

/// Ten certificates of one app due before another app's one, while the first app's queue is
/// full: the sweep still queues the other app's renewal (the apps are taken in turn, their due
/// certificates interleaved), and the first app gets no more than its cap.
pub async fn a_full_queue_in_one_app_holds_back_no_other_apps_renewal(h: Harness) {
    use rp_shared::app::renewal::sweep;
    let settings = json!({"certificateValidityDays": 1});
    let (agent, _ca, _server) = agent_for(&h).await;
    let mut paired = Vec::new();
    // The busy app's ten, then the quiet app's one.
    for users in [10, 1] {
        let app = h.app().await;
        assert_eq!(
            h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(settings.clone())).await.status,
            200
        );
        let access = h.access_token(&app).await;
        for i in 0..users {
            let dev = device(&h, &app, &format!("user{i}@example.com"), None).await;
            pair(&h, &access, &dev, &format!("m-{i}")).await;
            paired.push(dev);
        }
        assert_eq!(agent.run_once().await.unwrap().issued.len(), users);
        // The quiet app's certificate is stored a minute later, so it is due last.
        h.clock.advance(Duration::from_secs(60));
    }
    h.clock.advance(Duration::from_secs(20 * 3600));
    let capped = HttpConfig { max_open_per_app: 2, ..HttpConfig::default() };
    let state = AppState::new(h.backend.clone(), capped);
    assert_eq!(sweep(&state).await, 3, "the busy app's two, up to its cap, and the quiet app's one");
    let certs = Certificates::new(h.backend.store.as_ref());
    let quiet = paired.last().unwrap();
    let quiet_certs =
        certs.all_of_device(&AppId::parse("appId", &quiet.app).unwrap(), &quiet.device_id).await.unwrap();
    assert!(quiet_certs[0].renewal_request_id.is_some(), "{quiet_certs:?}");
    // While the busy app's queue stays full, a sweep finds it so before it writes: no renewal,
    // and no device's encryption counter raised for one.
    let workstations = Workstations::new(h.backend.store.as_ref());
    let counters = || async {
        let mut counters = Vec::new();
        for dev in &paired {
            let app = AppId::parse("appId", &dev.app).unwrap();
            counters.push(workstations.enc_counter(&app, &dev.device_id).await.unwrap());
        }
        counters
    };
    let before = counters().await;
    assert_eq!(sweep(&state).await, 0);
    assert_eq!(counters().await, before);
    // The busy app's own cap, one place larger than the deployment's, lets one more renewal in.
    let busy = &paired[0].app;
    let limits = json!({"limit": 120, "windowSecs": 60, "maxOpenCertificateRequests": 3});
    assert_eq!(h.admin("PUT", &format!("/cc/api/apps/{busy}/rate-limit"), Some(limits)).await.status, 200);
    assert_eq!(sweep(&state).await, 1);
}

/// Workstations unpairing while the agent delivers their renewals: every unpairing answers 204,
/// and afterwards no certificate of those pairings is left unrevoked, whichever came first.
/// Every certificate a device holds of `app`, each with whether the agent's CA revoked it.
async fn held_certificates(h: &Harness, app: &str, dev: &TestDevice, ca: &LocalCa) -> Vec<(String, bool)> {
    let app_id = AppId::parse("appId", app).unwrap();
    let held =
        Certificates::new(h.backend.store.as_ref()).all_of_device(&app_id, &dev.device_id).await.unwrap();
    held.into_iter()
        .map(|c| {
            let revoked = ca.is_revoked(&c.cert_serial_number);
            (c.cert_serial_number, revoked)
        })
        .collect()
}

/// A pairing ended before its login certificate is issued (unpaired, or its device removed,
/// while the request waits): the unpairing had nothing to revoke, so the certificate the agent
/// issues later is revoked as its result is stored, and the agent's next pass carries it out.
pub async fn a_certificate_issued_after_its_pairing_ended_is_revoked(h: Harness) {
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let devices = paired(&h, &app, &access, "gone", 2).await;
    let (unpaired, removed) = (&devices[0], &devices[1]);
    let path = format!("/rp/api/client/reg?machineId=m-gone-0&deviceId={}", unpaired.device_id);
    assert_eq!(h.client.send("DELETE", &path, Some(&access), None).await.status, 204);
    let path = format!("/cc/api/apps/{app}/devices/{}", removed.device_id);
    assert_eq!(h.admin("DELETE", &path, None).await.status, 204);
    let (agent, ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 2, "the requests were queued already");
    let certs =
        h.client.send("GET", "/rp/versioned/device/certificates", Some(&unpaired.token), None).await.json();
    assert_eq!(certs["certificates"][0]["revoked"], true, "withdrawn before the agent revokes it: {certs}");
    let pass = agent.run_once().await.unwrap();
    assert_eq!(pass.revoked.len(), 2, "{pass:?}");
    for dev in &devices {
        let held = held_certificates(&h, &app, dev, &ca).await;
        assert!(held.len() == 1 && held[0].1, "{}: {held:?}", dev.user);
    }
    // A repeated result revokes nothing twice.
    assert!(agent.run_once().await.unwrap().revoked.is_empty());
}

/// Unpairings race the agent's pass that issues their certificates: whichever lands first,
/// no certificate of an ended pairing stays valid.
pub async fn unpairing_wins_over_the_first_issue_of_its_certificate(h: Harness) {
    let Some(h) = h.for_races() else { return };
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let devices = paired(&h, &app, &access, "first", 6).await;
    let (agent, ca, _server) = agent_for(&h).await;
    unpair_racing_a_pass(&h, &access, &agent, &devices, "first").await;
    for dev in &devices {
        let held = held_certificates(&h, &app, dev, &ca).await;
        assert!(held.iter().all(|(_, revoked)| *revoked), "{}: {held:?}", dev.user);
    }
}

/// `count` devices of `app`, of the users `{prefix}{i}@example.com`, each paired with the
/// machine `m-{prefix}-{i}`.
async fn paired(h: &Harness, app: &str, access: &str, prefix: &str, count: usize) -> Vec<TestDevice> {
    let mut devices = Vec::new();
    for i in 0..count {
        let dev = device(h, app, &format!("{prefix}{i}@example.com"), None).await;
        pair(h, access, &dev, &format!("m-{prefix}-{i}")).await;
        devices.push(dev);
    }
    devices
}

/// Unpairs each of `devices` ([`paired`] with `prefix`) during one pass of `agent`, the
/// unpairings starting a yield apart; then three more passes carry out what was queued.
async fn unpair_racing_a_pass(
    h: &Harness,
    access: &str,
    agent: &Agent,
    devices: &[TestDevice],
    prefix: &str,
) {
    let unpairs = futures_util::future::join_all(devices.iter().enumerate().map(|(i, dev)| {
        let path = format!("/rp/api/client/reg?machineId=m-{prefix}-{i}&deviceId={}", dev.device_id);
        async move {
            for _ in 0..i {
                tokio::task::yield_now().await;
            }
            h.client.send("DELETE", &path, Some(access), None).await.status.as_u16()
        }
    }));
    let (pass, statuses) = tokio::join!(agent.run_once(), unpairs);
    pass.unwrap();
    assert_eq!(statuses, vec![204; devices.len()]);
    for _ in 0..3 {
        agent.run_once().await.unwrap();
    }
}

/// The narrowest window of that race, held open: the unpairing has read the request (not yet
/// issued) and waits to write while the agent leases it, issues it and stores the result, which
/// still finds the pairing. The unpairing's write then fails on the changed request, and its
/// retry revokes the certificate.
pub async fn an_unpairing_that_read_before_the_issue_revokes_it(h: Harness) {
    use rp_shared::domain::pairing::PairingKey;
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "held@example.com", None).await;
    pair(&h, &access, &dev, "m-held").await;
    let app_id = AppId::parse("appId", &app).unwrap();
    let key = PairingKey { machine_id: "m-held".into(), device_id: dev.device_id.clone() };
    let (gate, unpairing) = h
        .held(move |held| async move {
            rp_shared::app::pairing::unpair(&held, &app_id, &key, None, "admin:test")
                .await
                .map_err(|e| e.to_string())
        })
        .await;
    let (agent, ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 1);
    gate.open(true);
    unpairing.await.unwrap().unwrap();
    assert_eq!(agent.run_once().await.unwrap().revoked.len(), 1);
    let held = held_certificates(&h, &app, &dev, &ca).await;
    assert!(held.len() == 1 && held[0].1, "{held:?}");
}

/// A write read before an unpairing cannot land on the pairing made again after it: the
/// workstation's rename, held between its read and its write while the pairing is removed and
/// made anew, goes to the new pairing, which keeps its own certificate request.
pub async fn a_rename_read_before_a_new_pairing_keeps_the_new_pairing(h: Harness) {
    use rp_shared::domain::pairing::PairingUpdate;
    use rp_shared::repo::workstations::Workstations;
    let app = h.app().await;
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "again@example.com", None).await;
    let first = pair(&h, &access, &dev, "m-again").await;
    let app_id = AppId::parse("appId", &app).unwrap();
    let workstations = Workstations::new(h.backend.store.as_ref());
    let (old, _) = workstations.pairing(&app_id, "m-again", &dev.device_id).await.unwrap().unwrap();
    let owner = old.owner_token_id.clone().expect("the pairing's workstation");
    let update = PairingUpdate {
        machine_id: "m-again".into(),
        device_id: dev.device_id.clone(),
        machine_name: Some("WS-late".into()),
        offline: None,
        used_token_ids: Vec::new(),
        failed_attempts: 0,
    };
    let (gate, renaming) = h
        .held(move |held| async move {
            rp_shared::app::pairing::update(&held, &app_id, &owner, update)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await;
    let path = format!("/rp/api/client/reg?machineId=m-again&deviceId={}", dev.device_id);
    assert_eq!(h.client.send("DELETE", &path, Some(&access), None).await.status, 204);
    let body = json!({"machineId": "m-again", "deviceId": dev.device_id, "machineUserNameWS": dev.user});
    let again = h.client.send("POST", "/rp/api/client/reg", Some(&access), Some(body)).await;
    assert_eq!(again.status, 201, "{}", again.json());
    let second = again.json()["certificateRequestId"].as_str().unwrap().to_owned();
    assert_ne!(first, second);
    gate.open(true);
    renaming.await.unwrap().unwrap();
    let now = h.client.send("GET", &path, Some(&access), None).await.json();
    assert_eq!(
        (now["certificateRequestId"].as_str(), now["machineName"].as_str()),
        (Some(second.as_str()), Some("WS-late")),
        "{now}"
    );
}

pub async fn unpairing_wins_over_a_renewal_delivered_at_once(h: Harness) {
    use rp_shared::app::renewal::sweep;
    use rp_shared::repo::certificates::Certificates;
    let app = h.app().await;
    let settings = json!({"certificateValidityDays": 1});
    assert_eq!(h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(settings)).await.status, 200);
    let access = h.access_token(&app).await;
    let devices = paired(&h, &app, &access, "race", 6).await;
    let (agent, _ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 6);
    h.clock.advance(Duration::from_secs(20 * 3600));
    let state = AppState::new(h.backend.clone(), HttpConfig::default());
    assert_eq!(sweep(&state).await, 6);

    unpair_racing_a_pass(&h, &access, &agent, &devices, "race").await;
    let certs = Certificates::new(h.backend.store.as_ref());
    let app_id = AppId::parse("appId", &app).unwrap();
    for dev in &devices {
        let held = certs.all_of_device(&app_id, &dev.device_id).await.unwrap();
        assert!(held.iter().all(|c| c.revoked_at.is_some()), "{}: {held:?}", dev.user);
    }
}

/// An admin revokes a certificate while its renewal waits for the agent: the workstation stays
/// paired, and the renewal's certificate, issued after, is revoked too (the next pass carries it
/// out), so no certificate outlives the one the admin revoked.
pub async fn an_admin_revocation_takes_the_waiting_renewal_with_it(h: Harness) {
    use rp_shared::app::renewal::sweep;
    let app = h.app().await;
    let settings = json!({"certificateValidityDays": 1});
    assert_eq!(h.admin("PUT", &format!("/cc/api/apps/{app}/workstation"), Some(settings)).await.status, 200);
    let access = h.access_token(&app).await;
    let dev = device(&h, &app, "cy@example.com", None).await;
    pair(&h, &access, &dev, "m-revoked-renewal").await;
    let (agent, ca, _server) = agent_for(&h).await;
    assert_eq!(agent.run_once().await.unwrap().issued.len(), 1);
    let old_serial = first_serial(&h, &dev).await;
    h.clock.advance(Duration::from_secs(20 * 3600));
    assert_eq!(sweep(&AppState::new(h.backend.clone(), HttpConfig::default())).await, 1, "due");

    let r = h.admin("POST", &format!("/cc/api/certificates/{old_serial}/revoke"), None).await;
    assert_eq!(r.status, 202, "{}", r.json());
    let pass = agent.run_once().await.unwrap();
    assert_eq!((pass.issued.len(), pass.revoked.len()), (1, 1), "the renewal, and the old one: {pass:?}");
    let pass = agent.run_once().await.unwrap();
    assert_eq!(pass.revoked.len(), 1, "the renewal's certificate: {pass:?}");
    let held = held_certificates(&h, &app, &dev, &ca).await;
    assert!(held.len() == 2 && held.iter().all(|(_, revoked)| *revoked), "{held:?}");
    let path = format!("/rp/api/client/reg?machineId=m-revoked-renewal&deviceId={}", dev.device_id);
    assert_eq!(h.client.send("GET", &path, Some(&access), None).await.status, 200, "still paired");
}
