//! The reference enrollment agent: polls the certificate queue with an admin token, issues login
//! certificates from a local CA (sealed for the requesting device, see
//! [`crate::domain::envelope`]), revokes serials in its CA's list, and posts every result. It
//! drops requests it could not finish inside their timeout window: the server re-queues those.

use crate::domain::apps::AppId;
use crate::domain::envelope;
use crate::http::wire::certificates::{
    CertificateRequestList, IssuanceResult, LoginCertRequest, RevocationResult,
};
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
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod sids;
pub use sids::{Sid, SidMap};

/// How long issued login certificates are valid when the poll does not say (the app's
/// `certificateValidityDays` does).
const DEFAULT_VALIDITY_DAYS: i64 = crate::domain::apps::DEFAULT_CERTIFICATE_VALIDITY_DAYS;

/// Extended key usage Smart Card Logon (Microsoft), which Windows certificate logon requires
/// beside Client Authentication.
pub const SMART_CARD_LOGON: &[u64] = &[1, 3, 6, 1, 4, 1, 311, 20, 2, 2];
/// The otherName of a user principal name (UPN) in a subject alternative name.
pub const UPN: &[u64] = &[1, 3, 6, 1, 4, 1, 311, 20, 2, 3];

/// What a login certificate is issued for.
pub struct LoginProfile<'a> {
    /// The user's principal name (`machineUserName`: the user name in e-mail form).
    pub upn: &'a str,
    pub validity_days: i64,
    /// The public base URL its CRL distribution point and CA issuers URL point under.
    pub public_base_url: &'a str,
    /// The user's SID, for the SID extension (strong mapping, `sids`).
    pub sid: Option<&'a Sid>,
}
/// The agent's own error codes in posted error payloads.
pub const ERROR_ISSUANCE: i64 = 2001;
pub const ERROR_REVOCATION: i64 = 2002;

/// How often the agent publishes its CRL when nothing was revoked; each CRL's `nextUpdate` is
/// twice this after its `thisUpdate`, so a verifier holding the last one never sees it lapse
/// while the agent runs.
pub const DEFAULT_CRL_REFRESH: Duration = Duration::from_secs(3600);

/// The agent's certificate authority: a P-256 key and self-signed certificate in a directory,
/// created on first use (the key with mode 0600), and the serials it revoked with when. One
/// `LocalCa` holds its directory at a time: each keeps the revocations in memory and writes them
/// whole, so a second beside it would write over the first one's.
pub struct LocalCa {
    dir: PathBuf,
    /// `agent.lock`, locked for as long as this CA is open.
    _lock: std::fs::File,
    key: KeyPair,
    /// The same key, for signing version-2 envelopes.
    signer: p256::ecdsa::SigningKey,
    cert_der: Vec<u8>,
    state: Mutex<Revocations>,
}

/// `revoked.json`: each revoked serial with its revocation time (epoch seconds), the expiry of
/// each whose expiry is known (epoch seconds), and the number of the last CRL built.
#[derive(Debug, Default, serde::Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Revocations {
    revoked: BTreeMap<String, i64>,
    #[serde(default)]
    expires: BTreeMap<String, i64>,
    #[serde(default)]
    crl_number: u64,
}

/// The longest a certificate of this CA can be valid after its revocation: an app's longest
/// validity, since a certificate is revoked after it is issued. A serial whose expiry is not
/// known is listed that long.
const MAX_VALIDITY_SECS: i64 = crate::domain::apps::MAX_CERTIFICATE_VALIDITY_DAYS * 86_400;

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

/// An e-mail address in the form a certificate's rfc822Name takes: ASCII `local@domain`.
fn is_email(name: &str) -> bool {
    let Some((local, domain)) = name.split_once('@') else { return false };
    name.is_ascii()
        && !local.is_empty()
        && domain.contains('.')
        && !domain.contains('@')
        && !name.contains(' ')
}

/// The authority information access extension naming the CA certificate's URL (caIssuers),
/// encoded by x509-cert.
fn ca_issuers(url: &str) -> anyhow::Result<rcgen::CustomExtension> {
    use x509_cert::der::asn1::Ia5String;
    use x509_cert::der::Encode as _;
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::{AccessDescription, AuthorityInfoAccessSyntax};
    const CA_ISSUERS: x509_cert::der::asn1::ObjectIdentifier =
        x509_cert::der::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.48.2");
    const AUTHORITY_INFO_ACCESS: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 1, 1];
    let access = AuthorityInfoAccessSyntax(vec![AccessDescription {
        access_method: CA_ISSUERS,
        access_location: GeneralName::UniformResourceIdentifier(Ia5String::new(url)?),
    }]);
    Ok(rcgen::CustomExtension::from_oid_content(AUTHORITY_INFO_ACCESS, access.to_der()?))
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
    /// Opens the CA in `dir`, creating it on first use; refused while another process (or
    /// another `LocalCa` of this one) has it open.
    pub fn open_or_create(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let lock =
            std::fs::File::options().create(true).truncate(false).write(true).open(dir.join("agent.lock"))?;
        lock.try_lock().map_err(|e| match e {
            std::fs::TryLockError::WouldBlock => anyhow::anyhow!(
                "another agent has the CA in {} open: run one agent per CA directory",
                dir.display()
            ),
            std::fs::TryLockError::Error(e) => anyhow::Error::from(e).context("cannot lock the CA directory"),
        })?;
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
        let state = match std::fs::read(dir.join("revoked.json")) {
            Ok(bytes) => Revocations::parse(&bytes)?,
            Err(_) => Revocations::default(),
        };
        Ok(Self { dir: dir.to_owned(), _lock: lock, key, signer, cert_der, state: Mutex::new(state) })
    }

    /// The CA certificate, DER.
    pub fn certificate_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// A short, stable id of this CA: the first 16 hex digits of the SHA-256 of its certificate.
    /// Its CRL and certificate are published under `/rp/pki/<id>/`.
    pub fn id(&self) -> String {
        crate::domain::pki::ca_id(&self.cert_der)
    }

    /// Where this CA's CRL and certificate are published under `base`.
    pub fn urls(&self, base: &str) -> (String, String) {
        let base = format!("{}/rp/pki/{}", base.trim_end_matches('/'), self.id());
        (format!("{base}/crl"), format!("{base}/ca.crt"))
    }

    /// Issues a login certificate for `profile`: Client Authentication and Smart Card Logon
    /// usages, the UPN as an otherName (and as an rfc822Name where it is an e-mail address),
    /// digitalSignature only (a P-256 key needs no keyEncipherment), a CRL distribution point
    /// and a CA issuers URL under the public base URL, and the SID extension when the profile
    /// has the user's SID; basic constraints `cA: FALSE`, and key identifiers for its own key and
    /// the CA's. Returns (PEM bundle of certificate and
    /// private key, lowercase hex serial, expiry in epoch ms).
    pub fn issue(&self, profile: &LoginProfile) -> anyhow::Result<(String, String, i64)> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let mut serial = [0u8; 16];
        rand::rngs::OsRng.fill_bytes(&mut serial);
        serial[0] &= 0x7f;
        serial[0] |= 0x01;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, profile.upn);
        params.distinguished_name = name;
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + time::Duration::days(profile.validity_days);
        params.serial_number = Some(SerialNumber::from(serial.to_vec()));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ClientAuth,
            ExtendedKeyUsagePurpose::Other(SMART_CARD_LOGON.to_vec()),
        ];
        params.subject_alt_names = vec![rcgen::SanType::OtherName((
            UPN.to_vec(),
            rcgen::OtherNameValue::Utf8String(profile.upn.to_owned()),
        ))];
        if is_email(profile.upn) {
            let email = rcgen::string::Ia5String::try_from(profile.upn)?;
            params.subject_alt_names.push(rcgen::SanType::Rfc822Name(email));
        }
        let (crl, ca_cert) = self.urls(profile.public_base_url);
        params.crl_distribution_points = vec![rcgen::CrlDistributionPoint { uris: vec![crl] }];
        params.custom_extensions = vec![ca_issuers(&ca_cert)?];
        if let Some(sid) = profile.sid {
            params.custom_extensions.push(sid.extension()?);
        }
        params.use_authority_key_identifier_extension = true;
        // Basic constraints `cA: FALSE` (critical) and the subject key identifier: a verifier
        // never takes the certificate for a CA, and a client picks it by its key.
        params.is_ca = IsCa::ExplicitNoCa;
        let issuer = Issuer::new(ca_params(), &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        let bundle = format!("{}{}", cert.pem(), key.serialize_pem());
        let expiry = (params.not_after.unix_timestamp_nanos() / 1_000_000) as i64;
        Ok((bundle, hex::encode(serial), expiry))
    }

    /// Adds `serial` to the revocation list (kept in `revoked.json`), revoked now unless it was
    /// already, with its certificate's expiry (epoch milliseconds) when known: the CRL lists it
    /// until then (and one CRL after).
    pub fn revoke(&self, serial: &str, expires_at: Option<i64>) -> anyhow::Result<()> {
        let mut state = self.state.lock().expect("the list lock is never poisoned");
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        state.revoked.entry(serial.to_owned()).or_insert(now);
        if let Some(millis) = expires_at {
            state.expires.insert(serial.to_owned(), millis.div_euclid(1000));
        }
        self.save(&state)
    }

    pub fn is_revoked(&self, serial: &str) -> bool {
        self.state.lock().expect("the list lock is never poisoned").revoked.contains_key(serial)
    }

    fn save(&self, state: &Revocations) -> anyhow::Result<()> {
        let tmp = self.dir.join(format!("revoked.json.{}", uuid::Uuid::new_v4()));
        std::fs::write(&tmp, serde_json::to_vec_pretty(state)?)?;
        std::fs::rename(tmp, self.dir.join("revoked.json"))?;
        Ok(())
    }

    /// A CRL (DER) of the serials revoked whose certificates have not expired (and those that
    /// expired within `valid_for`), signed by the CA: `thisUpdate` now, `nextUpdate` `valid_for`
    /// later, and a CRL number above every earlier one (kept in `revoked.json`, and never below
    /// the time in seconds, so a CA directory restored from an older backup still numbers
    /// upwards). The serials it no longer lists leave `revoked.json`: the CRL, and the list,
    /// grow with the certificates still valid, not with every one ever revoked.
    pub fn crl(&self, valid_for: Duration) -> anyhow::Result<(Vec<u8>, u64)> {
        self.crl_at(time::OffsetDateTime::now_utc(), valid_for)
    }

    fn crl_at(&self, now: time::OffsetDateTime, valid_for: Duration) -> anyhow::Result<(Vec<u8>, u64)> {
        let mut state = self.state.lock().expect("the list lock is never poisoned");
        let number = (state.crl_number + 1).max(now.unix_timestamp() as u64);
        let (now_secs, window) = (now.unix_timestamp(), valid_for.as_secs() as i64);
        let Revocations { revoked, expires, .. } = &mut *state;
        revoked.retain(|serial, at| listed(expires.get(serial).copied(), *at, now_secs, window));
        expires.retain(|serial, _| revoked.contains_key(serial));
        let revoked_certs = state
            .revoked
            .iter()
            .map(|(serial, at)| {
                Ok(rcgen::RevokedCertParams {
                    serial_number: SerialNumber::from(
                        hex::decode(serial).context("a revoked serial is not hex")?,
                    ),
                    revocation_time: time::OffsetDateTime::from_unix_timestamp(*at)?,
                    reason_code: None,
                    invalidity_date: None,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let params = rcgen::CertificateRevocationListParams {
            this_update: now,
            next_update: now + valid_for,
            crl_number: SerialNumber::from(number.to_be_bytes().to_vec()),
            issuing_distribution_point: None,
            revoked_certs,
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&Issuer::new(ca_params(), &self.key))?;
        state.crl_number = number;
        self.save(&state)?;
        Ok((crl.der().to_vec(), number))
    }
}

impl Revocations {
    /// `revoked.json` as this agent writes it, or as earlier agents did (a list of serials,
    /// taken as revoked now).
    fn parse(bytes: &[u8]) -> anyhow::Result<Self> {
        if let Ok(state) = serde_json::from_slice::<Self>(bytes) {
            return Ok(state);
        }
        let serials: BTreeSet<String> =
            serde_json::from_slice(bytes).context("revoked.json does not parse")?;
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let revoked = serials.into_iter().map(|s| (s, now)).collect();
        Ok(Self { revoked, expires: BTreeMap::new(), crl_number: 0 })
    }
}

/// Whether a serial revoked at `revoked_at` whose certificate expires at `expiry` (if known)
/// still belongs on a CRL built at `now` that is valid for `valid_for` seconds: until the
/// certificate expires, and for one CRL's validity after that, so that a CRL issued after the
/// expiry lists it (RFC 5280 §5.1.2.6) while the agent publishes every half of that. Past it, a
/// verifier refuses the certificate as expired, and the entry only makes the CRL larger.
fn listed(expiry: Option<i64>, revoked_at: i64, now: i64, valid_for: i64) -> bool {
    now <= expiry.unwrap_or(revoked_at + MAX_VALIDITY_SECS) + valid_for
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

/// Where the relying-party API is, as the demo programs take it (`--base-url`).
#[derive(Debug, Clone, clap::Args)]
pub struct ApiAddress {
    /// Base URL of the relying-party API.
    #[arg(long, env = "RP_BASE_URL", default_value = "http://127.0.0.1:8080")]
    pub base_url: String,
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    pub issued: Vec<String>,
    pub revoked: Vec<String>,
    pub failed: Vec<String>,
    /// Requests dropped for being outside their timeout window.
    pub dropped: Vec<String>,
    /// The number of the CRL this pass published: after a revocation, on the first pass, and
    /// once the last one is older than the refresh interval.
    pub crl: Option<u64>,
    /// Results the server refused (409: the lease had ended or another result was kept; 410: the
    /// request is dead). A refused issuance is revoked in the agent's own CA.
    pub refused: Vec<String>,
}

/// How many times the agent sends an event whose answer is lost.
const EVENT_SENDS: u32 = 3;

pub struct Agent {
    http: reqwest::Client,
    base_url: String,
    /// Where the certificates' CRL and CA issuers URLs point (the API's public address).
    public_base_url: String,
    token: String,
    ca: std::sync::Arc<LocalCa>,
    crl_refresh: Duration,
    /// When the last CRL was published (none yet: the first pass publishes one).
    crl_published: Mutex<Option<Instant>>,
    /// The users' SIDs, read again at every pass that has certificates to issue.
    sid_map: Option<PathBuf>,
}

impl Agent {
    /// An agent for the API at `base_url`: `https`, or plain `http` on the loopback interface
    /// only (the admin token and the certificates would cross the network in the clear).
    pub fn new(base_url: &str, token: &str, ca: std::sync::Arc<LocalCa>) -> anyhow::Result<Self> {
        check_base_url(base_url)?;
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        let base_url = base_url.trim_end_matches('/').to_owned();
        Ok(Self {
            http,
            public_base_url: base_url.clone(),
            base_url,
            token: token.to_owned(),
            ca,
            crl_refresh: DEFAULT_CRL_REFRESH,
            crl_published: Mutex::new(None),
            sid_map: None,
        })
    }

    /// The agent, publishing its CRL every `every` when nothing is revoked (and after every
    /// revocation).
    pub fn with_crl_refresh(mut self, every: Duration) -> Self {
        self.crl_refresh = every;
        self
    }

    /// Builds the CA's CRL and publishes it at `PUT /rp/pki/<CA id>/crl`, with the CA
    /// certificate; the CRL number it published.
    pub async fn publish_crl(&self) -> anyhow::Result<u64> {
        let (crl, number) = self.ca.crl(self.crl_refresh * 2)?;
        let body = json!({"crl": STANDARD.encode(&crl), "caCertificate": STANDARD.encode(self.ca.certificate_der())});
        let response = self
            .http
            .put(format!("{}/rp/pki/{}/crl", self.base_url, self.ca.id()))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        // 409: a CRL with a higher number is published already (another pass of this agent got
        // there first); it was built later, so it lists every serial this one does.
        if status != reqwest::StatusCode::CONFLICT {
            anyhow::ensure!(
                status.is_success(),
                "publishing the CRL answered {status}: {}",
                response.text().await?
            );
        }
        *self.crl_published.lock().expect("never poisoned") = Some(Instant::now());
        Ok(number)
    }

    /// The agent, with the certificates' CRL and CA issuers URLs under `url` (when the API's
    /// public address is not the one the agent calls).
    pub fn with_public_base_url(mut self, url: &str) -> Self {
        self.public_base_url = url.trim_end_matches('/').to_owned();
        self
    }

    /// The agent, writing each user's SID from the map at `path` in their certificate
    /// ([`SidMap::load`]); a user the map does not name gets no certificate (the issuance fails,
    /// and says so). The map is read now, to refuse one that does not parse, and again at every
    /// pass, so an export written while the agent runs is used from its next pass.
    pub fn with_sid_map(mut self, path: &Path) -> anyhow::Result<Self> {
        SidMap::load(path)?;
        self.sid_map = Some(path.to_owned());
        Ok(self)
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
        // No certificate without its user's SID: while the map does not parse, the pass issues
        // nothing (the leases end and the requests are queued again), revokes all the same, and
        // then fails.
        let (sids, unread) = match &self.sid_map {
            Some(path) if !list.login_certs.is_empty() => match SidMap::load(path) {
                Ok(map) => (Some(map), None),
                Err(e) => (None, Some(e)),
            },
            _ => (None, None),
        };
        let login_certs = if unread.is_some() { Vec::new() } else { list.login_certs };
        for request in login_certs {
            if polled_at.elapsed() >= Duration::from_secs(request.request_timeout_in_secs.max(0) as u64) {
                report.dropped.push(request.request_id);
                continue;
            }
            match self.issue(&request, sids.as_ref()) {
                Ok(result) => match self.post("/rp/api/certificate", &result).await? {
                    s if s.is_success() => report.issued.push(request.request_id),
                    reqwest::StatusCode::CONFLICT | reqwest::StatusCode::GONE => {
                        // The server kept another result (or none): this certificate would be
                        // valid at the CA and unknown to the server, so the CA revokes it.
                        if let Some(serial) = &result.login_cert_serial_number {
                            self.ca.revoke(serial, result.login_cert_expiry_date)?;
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
            match self.ca.revoke(&request.cert_serial_number, request.login_cert_expiry_date) {
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
        let due = self
            .crl_published
            .lock()
            .expect("never poisoned")
            .is_none_or(|at| at.elapsed() >= self.crl_refresh);
        if due || !report.revoked.is_empty() || !report.refused.is_empty() {
            match self.publish_crl().await {
                Ok(number) => report.crl = Some(number),
                Err(e) => {
                    // The next pass publishes again, whatever the interval.
                    *self.crl_published.lock().expect("never poisoned") = None;
                    return Err(e.context("the pass's results are posted, its CRL is not"));
                }
            }
        }
        match unread {
            Some(e) => Err(e.context("the pass issued nothing (its revocations are posted)")),
            None => Ok(report),
        }
    }

    fn issue(&self, request: &LoginCertRequest, sids: Option<&SidMap>) -> anyhow::Result<IssuanceResult> {
        let user = request.machine_user_name.as_deref().context("the request names no user")?;
        let sid = match sids {
            Some(map) => Some(map.get(user).with_context(|| format!("the SID map names no user {user}"))?),
            None => None,
        };
        let device_key =
            request.device_key_agreement_public_key.as_deref().context("the request has no device key")?;
        let counter = request.enc_counter.as_deref().unwrap_or("0");
        let profile = LoginProfile {
            upn: user,
            validity_days: request.certificate_validity_days.unwrap_or(DEFAULT_VALIDITY_DAYS),
            public_base_url: &self.public_base_url,
            sid,
        };
        let (bundle, serial, expiry) = self.ca.issue(&profile)?;
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
        let status = self.report_event(event).await?;
        anyhow::ensure!(status.is_success(), "posting the failure event answered {status}");
        Ok(())
    }

    /// Posts `event` with an id of its own (`eventId`), and sends it again while its answer is
    /// lost (none came, or a 5xx or 429), [`EVENT_SENDS`] times at most: the server stores a
    /// report sent again with its id once.
    async fn report_event(&self, mut event: serde_json::Value) -> anyhow::Result<reqwest::StatusCode> {
        event["eventId"] = json!(uuid::Uuid::new_v4().to_string());
        let mut sent = 1;
        loop {
            let answer = self.post("/rp/api/events", &event).await;
            let lost = match &answer {
                Ok(status) => status.is_server_error() || *status == reqwest::StatusCode::TOO_MANY_REQUESTS,
                Err(_) => true,
            };
            if !lost || sent == EVENT_SENDS {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(500 * u64::from(sent))).await;
            sent += 1;
        }
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
                    crl = report.crl,
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
    /// An event whose answer is lost is sent again with the same id; one that is answered is not.
    #[tokio::test]
    async fn an_event_whose_answer_is_lost_is_sent_again_with_its_id() {
        use std::sync::{Arc, Mutex};
        let received = Arc::new(Mutex::new(Vec::<serde_json::Value>::new()));
        let seen = received.clone();
        let events = axum::routing::post(move |axum::Json(body): axum::Json<serde_json::Value>| async move {
            let mut seen = seen.lock().unwrap();
            seen.push(body);
            match seen.len() {
                1 => axum::http::StatusCode::SERVICE_UNAVAILABLE,
                _ => axum::http::StatusCode::CREATED,
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = axum::Router::new().route("/rp/api/events", events);
        tokio::spawn(async move { axum::serve(listener, server).await });
        let dir = tempfile::tempdir().unwrap();
        let ca = Arc::new(super::LocalCa::open_or_create(dir.path()).unwrap());
        let agent = super::Agent::new(&base, "rpt_agent-token-for-the-test", ca).unwrap();
        let event = serde_json::json!({"name": "WORKSTATION_CERTIFICATE_ISSUED", "attributes": {"isSuccessful": false}});
        assert_eq!(agent.report_event(event.clone()).await.unwrap(), reqwest::StatusCode::CREATED);
        let bodies = received.lock().unwrap().clone();
        assert_eq!(bodies.len(), 2, "sent again once: {bodies:?}");
        let id = bodies[0]["eventId"].as_str().expect("an id of its own");
        assert_eq!(bodies[1]["eventId"], id, "the same id");
        assert_eq!(bodies[1]["name"], event["name"]);
        assert_eq!(agent.report_event(event).await.unwrap(), reqwest::StatusCode::CREATED);
        let bodies = received.lock().unwrap().clone();
        assert_eq!(bodies.len(), 3, "an answered event is sent once");
        assert_ne!(bodies[2]["eventId"], id, "each event its own id");
    }

    #[test]
    fn an_earlier_agents_list_of_serials_still_opens() {
        let state = super::Revocations::parse(br#"["0a1b", "0c2d"]"#).unwrap();
        assert_eq!(state.revoked.keys().collect::<Vec<_>>(), ["0a1b", "0c2d"]);
        assert_eq!(state.crl_number, 0);
        let state =
            super::Revocations::parse(br#"{"revoked": {"0a1b": 1700000000}, "crlNumber": 7}"#).unwrap();
        assert_eq!((state.revoked["0a1b"], state.crl_number), (1_700_000_000, 7));
    }

    #[test]
    fn the_crl_lists_a_serial_until_one_crl_after_its_certificate_expires() {
        let dir = tempfile::tempdir().unwrap();
        let ca = super::LocalCa::open_or_create(dir.path()).unwrap();
        let now = time::OffsetDateTime::now_utc();
        let millis = |offset: time::Duration| ((now + offset).unix_timestamp_nanos() / 1_000_000) as i64;
        ca.revoke("1a01", Some(millis(time::Duration::days(-10)))).unwrap();
        ca.revoke("1a02", Some(millis(time::Duration::days(10)))).unwrap();
        ca.revoke("1a03", Some(millis(time::Duration::seconds(-30)))).unwrap();
        ca.revoke("1a04", None).unwrap();
        ca.revoke("1a05", None).unwrap();
        ca.revoke("1a06", None).unwrap();
        // Revoked by an earlier agent, with no expiry known: longer ago than any validity, and
        // within the longest (365 days).
        let mut state = ca.state.lock().unwrap();
        state.revoked.insert("1a05".into(), (now - time::Duration::days(400)).unix_timestamp());
        state.revoked.insert("1a06".into(), (now - time::Duration::days(300)).unix_timestamp());
        drop(state);
        let (der, _) = ca.crl_at(now, std::time::Duration::from_secs(60)).unwrap();
        let listed = crate::testing::fixtures::crl_serials(&der);
        assert_eq!(
            listed,
            ["1a02", "1a03", "1a04", "1a06"],
            "valid, expired within one CRL's validity, unknown and within the longest validity"
        );
        drop(ca);
        let reopened = super::LocalCa::open_or_create(dir.path()).unwrap();
        assert!(!reopened.is_revoked("1a01") && !reopened.is_revoked("1a05"), "pruned from revoked.json too");
        assert!(reopened.is_revoked("1a02"));
    }

    #[test]
    fn crl_numbers_only_go_up() {
        let dir = tempfile::tempdir().unwrap();
        let ca = super::LocalCa::open_or_create(dir.path()).unwrap();
        let (_, first) = ca.crl(std::time::Duration::from_secs(60)).unwrap();
        let (_, second) = ca.crl(std::time::Duration::from_secs(60)).unwrap();
        assert!(second > first);
        drop(ca);
        let reopened = super::LocalCa::open_or_create(dir.path()).unwrap();
        assert!(reopened.crl(std::time::Duration::from_secs(60)).unwrap().1 > second, "kept across restarts");
    }

    /// One `LocalCa` has a directory at a time, in this process or another; once it is closed
    /// (or its process ends), the next opens it.
    #[test]
    fn a_ca_directory_is_open_in_one_agent_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let ca = super::LocalCa::open_or_create(dir.path()).unwrap();
        let err = super::LocalCa::open_or_create(dir.path()).err().expect("refused").to_string();
        assert_eq!(
            err,
            format!(
                "another agent has the CA in {} open: run one agent per CA directory",
                dir.path().display()
            )
        );
        let id = ca.id();
        drop(ca);
        assert_eq!(super::LocalCa::open_or_create(dir.path()).unwrap().id(), id, "the same CA");
    }

    /// Serials are positive 16-byte integers (RFC 5280 §4.1.2.2: positive, at most 20 octets),
    /// random, and written as the certificate carries them.
    #[test]
    fn serials_are_random_positive_sixteen_byte_integers() {
        use x509_cert::der::DecodePem as _;
        let dir = tempfile::tempdir().unwrap();
        let ca = super::LocalCa::open_or_create(dir.path()).unwrap();
        let profile = super::LoginProfile {
            upn: "ann@example.com",
            validity_days: 1,
            public_base_url: "https://rp",
            sid: None,
        };
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..32 {
            let (bundle, serial, _) = ca.issue(&profile).unwrap();
            let bytes = hex::decode(&serial).unwrap();
            assert_eq!(bytes.len(), 16, "{serial}");
            assert!((0x01..0x80).contains(&bytes[0]), "positive, with no leading zero: {serial}");
            let cert =
                x509_cert::Certificate::from_pem(&bundle[..bundle.find("-----BEGIN PRIVATE KEY").unwrap()])
                    .unwrap();
            assert_eq!(cert.tbs_certificate.serial_number.as_bytes(), bytes);
            seen.insert(serial);
        }
        assert_eq!(seen.len(), 32);
    }

    /// The UPN is also the rfc822Name only where it is an ASCII `local@domain.tld` (an
    /// rfc822Name is an IA5String: one beyond ASCII would fail the issuance).
    #[test]
    fn only_an_ascii_e_mail_address_is_an_rfc822_name() {
        assert!(super::is_email("alice@corp.example.com"));
        for not in [
            "CORP-bob",
            "bob@corp",
            "@corp.example.com",
            "a@b@corp.example.com",
            "a b@corp.example.com",
            "jürgen@corp.example.com",
        ] {
            assert!(!super::is_email(not), "{not}");
        }
    }

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
