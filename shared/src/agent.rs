//! The reference enrollment agent: polls the certificate queue with an admin token, issues login
//! certificates from a local CA (sealed for the requesting device, see
//! [`crate::domain::envelope`]), revokes serials in its CA's list, and posts every result. It
//! drops requests it could not finish inside their timeout window: the server re-queues those.

use crate::domain::apps::AppId;
use crate::domain::certificates::{
    CertificateRequestList, IssuanceResult, LoginCertRequest, RevocationResult,
};
use crate::domain::envelope;
use anyhow::Context as _;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use p256::pkcs8::DecodePrivateKey as _;
use rand::RngCore;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SerialNumber,
};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long issued login certificates are valid.
const CERT_VALIDITY_DAYS: i64 = 365;
/// The agent's own error codes in posted error payloads.
pub const ERROR_ISSUANCE: i64 = 2001;
pub const ERROR_REVOCATION: i64 = 2002;

/// The agent's certificate authority: a P-256 key and self-signed certificate in a directory,
/// created on first use (the key with mode 0600), and the list of serials it revoked.
pub struct LocalCa {
    dir: PathBuf,
    key: KeyPair,
    /// The same key, for signing version-2 envelopes.
    signer: p256::ecdsa::SigningKey,
    cert_der: Vec<u8>,
    revoked: Mutex<BTreeSet<String>>,
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "RP Enrollment Agent CA");
    name.push(DnType::OrganizationName, "Workstation relying party");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

impl LocalCa {
    /// Opens the CA in `dir`, creating it on first use.
    pub fn open_or_create(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let key_path = dir.join("ca-key.pem");
        let cert_path = dir.join("ca-cert.der");
        if !key_path.exists() {
            let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
            let mut params = ca_params();
            params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(1);
            params.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(3650);
            let cert = params.self_signed(&key)?;
            write_private(&key_path, key.serialize_pem().as_bytes())?;
            std::fs::write(&cert_path, cert.der().as_ref())?;
        }
        let key =
            KeyPair::from_pem(&std::fs::read_to_string(&key_path)?).context("the CA key does not parse")?;
        let signer = p256::ecdsa::SigningKey::from_pkcs8_der(&key.serialize_der())
            .context("the CA key is not a P-256 key")?;
        let cert_der = std::fs::read(&cert_path)?;
        let revoked = match std::fs::read(dir.join("revoked.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).context("revoked.json does not parse")?,
            Err(_) => BTreeSet::new(),
        };
        Ok(Self { dir: dir.to_owned(), key, signer, cert_der, revoked: Mutex::new(revoked) })
    }

    /// The CA certificate, DER.
    pub fn certificate_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// Issues a client-authentication certificate for `user`; returns (PEM bundle of certificate
    /// and private key, lowercase hex serial, expiry in epoch ms).
    pub fn issue(&self, user: &str) -> anyhow::Result<(String, String, i64)> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let mut serial = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut serial);
        serial[0] &= 0x7f;
        serial[0] |= 0x01;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, user);
        params.distinguished_name = name;
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + time::Duration::days(CERT_VALIDITY_DAYS);
        params.serial_number = Some(SerialNumber::from(serial.to_vec()));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let issuer = Issuer::new(ca_params(), &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        let bundle = format!("{}{}", cert.pem(), key.serialize_pem());
        let expiry = (params.not_after.unix_timestamp_nanos() / 1_000_000) as i64;
        Ok((bundle, hex::encode(serial), expiry))
    }

    /// Adds `serial` to the revocation list (kept in `revoked.json`).
    pub fn revoke(&self, serial: &str) -> anyhow::Result<()> {
        let mut revoked = self.revoked.lock().expect("the list lock is never poisoned");
        revoked.insert(serial.to_owned());
        let tmp = self.dir.join(format!("revoked.json.{}", uuid::Uuid::new_v4()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(&*revoked)?)?;
        std::fs::rename(tmp, self.dir.join("revoked.json"))?;
        Ok(())
    }

    pub fn is_revoked(&self, serial: &str) -> bool {
        self.revoked.lock().expect("the list lock is never poisoned").contains(serial)
    }
}

/// `https://…`, or `http://` to 127.0.0.0/8, `localhost` or `[::1]`.
pub fn check_base_url(base_url: &str) -> anyhow::Result<()> {
    if base_url.starts_with("https://") {
        return Ok(());
    }
    anyhow::ensure!(
        base_url.starts_with("http://"),
        "the base URL must start with https:// (or http:// on loopback)"
    );
    anyhow::ensure!(
        crate::config::is_loopback_url(base_url),
        "refusing plain http to {base_url}: use https, or http on the loopback interface"
    );
    Ok(())
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    pub issued: Vec<String>,
    pub revoked: Vec<String>,
    pub failed: Vec<String>,
    /// Requests dropped for being outside their timeout window.
    pub dropped: Vec<String>,
    /// Results the server refused (409: the lease had ended or another result was kept; 410: the
    /// request is dead). A refused issuance is revoked in the agent's own CA.
    pub refused: Vec<String>,
}

pub struct Agent {
    http: reqwest::Client,
    base_url: String,
    token: String,
    ca: std::sync::Arc<LocalCa>,
}

impl Agent {
    /// An agent for the API at `base_url`: `https`, or plain `http` on the loopback interface
    /// only (the admin token and the certificates would cross the network in the clear).
    pub fn new(base_url: &str, token: &str, ca: std::sync::Arc<LocalCa>) -> anyhow::Result<Self> {
        check_base_url(base_url)?;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        Ok(Self { http, base_url: base_url.trim_end_matches('/').to_owned(), token: token.to_owned(), ca })
    }

    async fn post(&self, path: &str, body: &impl Serialize) -> anyhow::Result<reqwest::StatusCode> {
        let response = self
            .http
            .post(format!("{}{path}", self.base_url))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await?;
        Ok(response.status())
    }

    /// One poll and everything it handed out.
    pub async fn run_once(&self) -> anyhow::Result<PassReport> {
        let polled_at = Instant::now();
        let response = self
            .http
            .get(format!("{}/rp/api/certificate/requests", self.base_url))
            .bearer_auth(&self.token)
            .send()
            .await?;
        anyhow::ensure!(response.status().is_success(), "poll answered {}", response.status());
        let list: CertificateRequestList = response.json().await?;
        let mut report = PassReport::default();
        for request in list.login_certs {
            if polled_at.elapsed() >= Duration::from_secs(request.request_timeout_in_secs.max(0) as u64) {
                report.dropped.push(request.request_id);
                continue;
            }
            match self.issue(&request) {
                Ok(result) => match self.post("/rp/api/certificate", &result).await? {
                    s if s.is_success() => report.issued.push(request.request_id),
                    reqwest::StatusCode::CONFLICT | reqwest::StatusCode::GONE => {
                        // The server kept another result (or none): this certificate would be
                        // valid at the CA and unknown to the server, so the CA revokes it.
                        if let Some(serial) = &result.login_cert_serial_number {
                            self.ca.revoke(serial)?;
                        }
                        report.refused.push(request.request_id)
                    }
                    s => anyhow::bail!("posting an issued certificate answered {s}"),
                },
                Err(e) => {
                    tracing::warn!(request_id = %request.request_id, error = %e, "issuance failed");
                    self.report_failure(
                        &request.request_id,
                        request.app_id.as_ref(),
                        ERROR_ISSUANCE,
                        &e.to_string(),
                        "WORKSTATION_CERTIFICATE_ISSUED",
                        "/rp/api/certificate",
                    )
                    .await?;
                    report.failed.push(request.request_id);
                }
            }
        }
        for request in list.revoked_certs {
            if polled_at.elapsed() >= Duration::from_secs(request.request_timeout_in_secs.max(0) as u64) {
                report.dropped.push(request.request_id);
                continue;
            }
            match self.ca.revoke(&request.cert_serial_number) {
                Ok(()) => {
                    let body = RevocationResult {
                        error_code: 0,
                        error_message: Some(String::new()),
                        request_id: Value::String(request.request_id.clone()),
                        cert_serial_number: Some(request.cert_serial_number.clone()),
                    };
                    match self.post("/rp/api/certificate/revoke", &body).await? {
                        s if s.is_success() => report.revoked.push(request.request_id),
                        reqwest::StatusCode::CONFLICT | reqwest::StatusCode::GONE => {
                            report.refused.push(request.request_id)
                        }
                        s => anyhow::bail!("posting a revocation answered {s}"),
                    }
                }
                Err(e) => {
                    self.report_failure(
                        &request.request_id,
                        request.app_id.as_ref(),
                        ERROR_REVOCATION,
                        &e.to_string(),
                        "WORKSTATION_CERTIFICATE_REVOKED",
                        "/rp/api/certificate/revoke",
                    )
                    .await?;
                    report.failed.push(request.request_id);
                }
            }
        }
        Ok(report)
    }

    fn issue(&self, request: &LoginCertRequest) -> anyhow::Result<IssuanceResult> {
        let user = request.machine_user_name.as_deref().context("the request names no user")?;
        let device_key =
            request.device_key_agreement_public_key.as_deref().context("the request has no device key")?;
        let counter = request.enc_counter.as_deref().unwrap_or("0");
        let (bundle, serial, expiry) = self.ca.issue(user)?;
        let binding = envelope::Binding {
            request_id: &request.request_id,
            enc_counter: counter,
            serial: &serial,
            expiry_ms: expiry,
        };
        let sealed = envelope::seal(device_key, &binding, bundle.as_bytes(), &self.ca.signer)?;
        let mut names = vec![user.to_owned()];
        names.extend(Some(request.machine_user_name_ws.clone()).filter(|n| !n.is_empty()));
        Ok(IssuanceResult {
            error_code: 0,
            error_message: Some(String::new()),
            request_id: Value::String(request.request_id.clone()),
            issuer_key_agreement_public_key: Some(sealed.issuer_key_agreement_public_key),
            issuer_key_agreement_public_key_auth: Some(sealed.issuer_key_agreement_public_key_auth),
            login_cert: Some(sealed.login_cert),
            login_cert_auth: Some(sealed.login_cert_auth),
            login_cert_serial_number: Some(serial),
            login_cert_expiry_date: Some(expiry),
            iv_login_cert: Some(sealed.iv_login_cert),
            signing_cert: Some(STANDARD.encode(self.ca.certificate_der())),
            machine_user_name_ws: Some(request.machine_user_name_ws.clone()),
            machine_user_names: Some(names),
            envelope_version: Some(sealed.version),
            login_cert_signature: sealed.login_cert_signature,
        })
    }

    /// Posts the error payload and the failure event (`isSuccessful=false`), with the request's
    /// app where the poll named it.
    async fn report_failure(
        &self,
        request_id: &str,
        app_id: Option<&AppId>,
        code: i64,
        message: &str,
        event: &str,
        path: &str,
    ) -> anyhow::Result<()> {
        let message: String = message.chars().take(5000).collect();
        let body = json!({"errorCode": code, "errorMessage": message, "requestId": request_id});
        let status = self.post(path, &body).await?;
        if !status.is_success()
            && status != reqwest::StatusCode::CONFLICT
            && status != reqwest::StatusCode::GONE
        {
            anyhow::bail!("posting an error result answered {status}");
        }
        let mut event = json!({"name": event, "attributes": {"isSuccessful": false, "errorCode": code, "requestId": request_id}});
        if let Some(app_id) = app_id {
            event["appId"] = json!(app_id);
        }
        let status = self.post("/rp/api/events", &event).await?;
        anyhow::ensure!(status.is_success(), "posting the failure event answered {status}");
        Ok(())
    }

    /// Polls every `interval` until `stop` resolves.
    pub async fn run(&self, interval: Duration, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            match self.run_once().await {
                Ok(report) => tracing::info!(
                    issued = report.issued.len(),
                    revoked = report.revoked.len(),
                    failed = report.failed.len(),
                    dropped = report.dropped.len(),
                    refused = report.refused.len(),
                    "agent pass"
                ),
                Err(e) => tracing::warn!(error = %e, "agent pass failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = &mut stop => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn plain_http_is_for_loopback_only() {
        for ok in [
            "https://rp.example.com",
            "http://127.0.0.1:8080",
            "http://localhost:8080/",
            "http://[::1]:80",
            "http://127.1.2.3",
        ] {
            assert!(super::check_base_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://rp.example.com",
            "http://10.0.0.5:8080",
            "http://127.0.0.1.evil.example",
            "ftp://x",
            "rp.example.com",
        ] {
            assert!(super::check_base_url(bad).is_err(), "{bad}");
        }
    }
}
