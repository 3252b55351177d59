//! The certificate queue (workstation-api.md; DECISIONS §3) as pure functions of
//! (request, event, now) → the request's next state, or a [`CertError`].
//!
//! PENDING → LEASED ([`CertRequest::lease`]) → DONE | FAILED ([`CertRequest::settle`], a result
//! within the lease), or back to PENDING when the lease ends without a result, or DEAD once it
//! has been leased `max_attempts` times ([`CertRequest::expire`]). Nothing here reads or writes
//! storage: `repo::certificates` persists what these functions decide, conditionally on the
//! version read, and the handlers retry on a lost race.

use super::apps::AppId;
use super::events::EventRecord;
use super::time::EpochMillis;
use super::validate::FieldError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map};
use std::time::Duration;

/// Leases a request gets before it is DEAD, unless `CERT_MAX_ATTEMPTS` says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// The `errorCode` of the event logged when a request dies.
pub const DEAD_ERROR_CODE: i64 = 1_300_010;
/// Longest `errorMessage` (workstation-api.md, Limits).
pub const MAX_ERROR_MESSAGE: usize = 5000;

/// Longest certificate serial number a result, or a revocation, may name.
pub const MAX_SERIAL_NUMBER: usize = 128;
/// The last part of a login certificate's life, in percent, in which its renewal is queued.
pub const RENEWAL_WINDOW_PERCENT: i64 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RequestKind {
    LoginCert,
    Revocation,
}

impl RequestKind {
    fn noun(self) -> &'static str {
        match self {
            RequestKind::LoginCert => "login-certificate",
            RequestKind::Revocation => "revocation",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RequestState {
    Pending,
    Leased,
    Done,
    Failed,
    Dead,
}

/// A certificate request: every LoginCertRequest (or RevokedCertRequest) field, and its state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CertRequest {
    pub request_id: String,
    pub kind: RequestKind,
    pub app_id: AppId,
    pub state: RequestState,
    pub request_timeout_in_secs: i64,
    pub machine_user_name_ws: Option<String>,
    pub machine_user_name: Option<String>,
    pub device_id: Option<String>,
    pub device_key_agreement_public_key: Option<String>,
    pub enc_counter: Option<String>,
    pub cert_serial_number: Option<String>,
    /// When the certificate a revocation is for expires (absent on requests queued before it
    /// was kept): the agent lists it on its CRL until then, and one CRL after.
    #[serde(default)]
    pub cert_expiry_date: Option<EpochMillis>,
    /// How long the certificate is to be valid (the app's setting when it was queued).
    pub certificate_validity_days: Option<i64>,
    /// The workstation of the pairing a login-certificate request is for (absent on requests
    /// queued before it was kept).
    pub machine_id: Option<String>,
    /// The serial number of the certificate a renewal replaces.
    pub renews: Option<String>,
    pub created_at: EpochMillis,
    /// How many times it was leased.
    #[serde(default)]
    pub attempts: u32,
    /// The current lease; on a DEAD request, the lease whose end killed it.
    pub lease_id: Option<String>,
    /// When the current lease ends.
    pub leased_until: Option<EpochMillis>,
    /// SHA-256 of the posted result, so the same result posted again is recognised.
    pub result_digest: Option<String>,
    pub error_code: Option<i64>,
    pub error_message: Option<String>,
}

/// What ending a lease without a result does.
#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    /// Back to PENDING for another agent.
    Requeued(CertRequest),
    /// Out of attempts: DEAD, reported by its event.
    Dead(CertRequest, EventRecord),
    /// This lease ended the request, which is DEAD already: nothing to write, but its dead
    /// letter is sent (again: the one sent when it died may have been lost, and a request a late
    /// result killed has none yet).
    AlreadyDead,
    /// Nothing to do: a result came in time, or this lease was already handled.
    Ignored,
}

/// What a posted result does to its request.
#[derive(Debug, Clone, PartialEq)]
pub enum Settlement {
    /// The result is accepted: the request DONE or FAILED, reported by the event.
    Settled { request: CertRequest, event: EventRecord },
    /// The same result was stored already: nothing to do (answer 204 again).
    Duplicate,
    /// The lease had ended: what ending it does, then the caller answers
    /// [`CertError::LeaseEnded`].
    LeaseEnded(Expiry),
}

/// The certificate area's errors; `http::errors` maps each to its problem+json answer.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("requestId: no {} request '{id}'", kind.noun())]
    RequestNotFound { kind: RequestKind, id: String },
    #[error("requestId: the request's lease ended before this result; it has been re-queued")]
    LeaseEnded,
    #[error("requestId: the request ran out of attempts and is dead; nothing more is accepted for it")]
    Dead,
    #[error("requestId: a different result for this request was stored already")]
    ResultDiffers,
    #[error("certSerialNumber: no certificate '{0}'")]
    CertNotFound(String),
    #[error("loginCertSerialNumber: a certificate with this serial number exists")]
    SerialTaken,
    #[error("certSerialNumber: '{0}' is revoked already")]
    AlreadyRevoked(String),
    #[error("the app has {cap} login-certificate requests open (pending or leased), its cap; retry once the agent has answered some")]
    QueueFull { cap: u32 },
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(CertError);

/// Open login-certificate requests an app may have (`CERT_MAX_OPEN_PER_APP`), unless
/// configured otherwise.
pub const DEFAULT_MAX_OPEN_PER_APP: u32 = 1000;

/// How many requests each of `apps` apps may have leased in one poll of `batch`: an equal
/// share, rounded up, so that every app with work gets at least one while `apps` ≤ `batch`.
pub fn fair_share(batch: usize, apps: usize) -> usize {
    if apps == 0 {
        0
    } else {
        batch.div_ceil(apps)
    }
}

/// How many pending requests a poll's first round reads from each of `apps` ready apps: an
/// equal part of twice the batch, at most the batch. Each still gets only its fair share while
/// the others have as many, but the room an app that comes up short leaves has usually been
/// read already from the others, without a second round of reads after the first. A poll reads
/// at most twice its batch plus one request per app.
pub fn first_round_reads(batch: usize, apps: usize) -> usize {
    if apps == 0 {
        0
    } else {
        (2 * batch).div_ceil(apps).min(batch)
    }
}

impl CertRequest {
    /// Whether the request counts against its app's cap of open requests: login-certificate
    /// requests do (a workstation queues them); revocations never do, so that a full queue
    /// cannot hold up a revocation.
    pub fn counts_against_cap(&self) -> bool {
        self.kind == RequestKind::LoginCert
    }

    /// Whether the request is settled for good (DONE, FAILED or DEAD).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, RequestState::Done | RequestState::Failed | RequestState::Dead)
    }

    /// A new PENDING request of `kind` with a fresh id; the kind's own fields are set by the
    /// caller.
    pub fn new(
        kind: RequestKind,
        app_id: AppId,
        request_timeout_in_secs: i64,
        created_at: EpochMillis,
    ) -> Self {
        Self {
            request_id: uuid::Uuid::new_v4().to_string(),
            kind,
            app_id,
            state: RequestState::Pending,
            request_timeout_in_secs,
            machine_user_name_ws: None,
            machine_user_name: None,
            device_id: None,
            device_key_agreement_public_key: None,
            enc_counter: None,
            cert_serial_number: None,
            cert_expiry_date: None,
            certificate_validity_days: None,
            machine_id: None,
            renews: None,
            created_at,
            attempts: 0,
            lease_id: None,
            leased_until: None,
            result_digest: None,
            error_code: None,
            error_message: None,
        }
    }

    /// How long one lease lasts.
    pub fn lease_duration(&self) -> Duration {
        Duration::from_secs(self.request_timeout_in_secs.max(0) as u64)
    }

    /// The request leased under `lease_id` until `now` + its timeout; `None` unless PENDING.
    pub fn lease(&self, lease_id: &str, now: EpochMillis) -> Option<CertRequest> {
        if self.state != RequestState::Pending {
            return None;
        }
        let mut leased = self.clone();
        leased.state = RequestState::Leased;
        leased.attempts += 1;
        leased.lease_id = Some(lease_id.to_owned());
        leased.leased_until = Some(now.plus_secs(self.request_timeout_in_secs));
        Some(leased)
    }

    /// Ends lease `lease_id` without a result: back to PENDING, or DEAD once the request has
    /// been leased `max_attempts` times. A lease that is not the current one is ignored.
    pub fn expire(&self, lease_id: &str, max_attempts: u32, now: EpochMillis) -> Expiry {
        if self.lease_id.as_deref() != Some(lease_id) {
            return Expiry::Ignored;
        }
        match self.state {
            RequestState::Leased => {}
            RequestState::Dead => return Expiry::AlreadyDead,
            _ => return Expiry::Ignored,
        }
        let mut next = self.clone();
        next.leased_until = None;
        if next.attempts >= max_attempts.max(1) {
            // A DEAD request keeps the lease that ended it, so that lease's time-out message,
            // delivered again, sends a lost dead letter again ([`Expiry::AlreadyDead`]).
            next.state = RequestState::Dead;
            let event = result_event(&next, DEAD_ERROR_CODE, "server", now);
            Expiry::Dead(next, event)
        } else {
            next.state = RequestState::Pending;
            next.lease_id = None;
            Expiry::Requeued(next)
        }
    }

    /// Applies a posted result reported by `source` at `now`.
    pub fn settle(
        &self,
        result: &CertResult,
        source: &str,
        now: EpochMillis,
        max_attempts: u32,
    ) -> Result<Settlement, CertError> {
        if self.kind != result.kind() {
            return Err(CertError::RequestNotFound { kind: result.kind(), id: result.request_id.clone() });
        }
        match self.state {
            RequestState::Done | RequestState::Failed => {
                if self.result_digest.as_deref() == Some(result.digest.as_str()) {
                    Ok(Settlement::Duplicate)
                } else {
                    Err(CertError::ResultDiffers)
                }
            }
            RequestState::Leased if self.leased_until.is_some_and(|until| now < until) => {
                let mut next = self.clone();
                next.result_digest = Some(result.digest.clone());
                next.lease_id = None;
                next.leased_until = None;
                let error_code = match &result.outcome {
                    Outcome::Failed { error_code, error_message } => {
                        next.state = RequestState::Failed;
                        next.error_code = Some(*error_code);
                        next.error_message = error_message.clone();
                        *error_code
                    }
                    Outcome::Issued(cert) => {
                        next.state = RequestState::Done;
                        next.cert_serial_number = Some(cert.login_cert_serial_number.clone());
                        0
                    }
                    Outcome::Revoked { cert_serial_number } => {
                        if self.cert_serial_number.as_deref() != Some(cert_serial_number.as_str()) {
                            return Err(FieldError::new(
                                "certSerialNumber",
                                "is not the serial number this request revokes",
                            )
                            .into());
                        }
                        next.state = RequestState::Done;
                        0
                    }
                };
                let event = result_event(&next, error_code, source, now);
                Ok(Settlement::Settled { request: next, event })
            }
            RequestState::Leased => {
                let lease_id = self.lease_id.clone().unwrap_or_default();
                Ok(Settlement::LeaseEnded(self.expire(&lease_id, max_attempts, now)))
            }
            RequestState::Pending => Ok(Settlement::LeaseEnded(Expiry::Ignored)),
            RequestState::Dead => Err(CertError::Dead),
        }
    }
}

/// The event a request's result (or death) is reported with.
pub fn result_event(request: &CertRequest, error_code: i64, source: &str, at: EpochMillis) -> EventRecord {
    let mut attributes = Map::new();
    attributes.insert("errorCode".into(), json!(error_code));
    attributes.insert("requestId".into(), json!(request.request_id));
    let name = match request.kind {
        RequestKind::LoginCert => {
            attributes.insert("isSuccessful".into(), json!(error_code == 0));
            "WORKSTATION_CERTIFICATE_ISSUED"
        }
        RequestKind::Revocation => "WS_CERTIFICATE_REVOKED",
    };
    if let Some(serial) = &request.cert_serial_number {
        attributes.insert("certSerialNumber".into(), json!(serial));
    }
    EventRecord::new(name, Some(request.app_id.clone()), source, at, attributes)
}

/// An issued (device-encrypted) login certificate, kept for delivery to its device and found by
/// serial number for revocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuedCert {
    pub cert_serial_number: String,
    pub app_id: AppId,
    pub request_id: String,
    pub device_id: String,
    pub named_user: String,
    #[serde(default, rename = "machineUserNameWS")]
    pub machine_user_name_ws: Option<String>,
    pub machine_user_names: Vec<String>,
    pub login_cert: String,
    pub iv_login_cert: String,
    pub login_cert_auth: String,
    pub issuer_key_agreement_public_key: String,
    pub issuer_key_agreement_public_key_auth: String,
    pub login_cert_expiry_date: EpochMillis,
    pub signing_cert: String,
    /// The envelope's version (certificates stored before versions existed are 1).
    #[serde(default = "envelope_v1")]
    pub envelope_version: u8,
    pub login_cert_signature: Option<String>,
    /// The device's counter the envelope was sealed under (a key-derivation input).
    pub enc_counter: Option<String>,
    pub issued_at: EpochMillis,
    pub revoked_at: Option<EpochMillis>,
    pub revocation_request_id: Option<String>,
    /// The renewal queued for it last.
    pub renewal_request_id: Option<String>,
    /// When the renewal sweep looks at it next; until a renewal is queued, when its renewal
    /// window opens ([`IssuedCert::renewal_window_opens`]).
    pub renewal_check_at: Option<EpochMillis>,
    /// The serial number of the certificate that replaced it.
    pub renewed_by: Option<String>,
}

/// What the renewal sweep does with a certificate it finds due ([`IssuedCert::renewal_step`]).
#[derive(Debug, Clone, PartialEq)]
pub enum RenewalStep {
    /// Revoked, being revoked or replaced: nothing, ever again.
    Done,
    /// Not due yet (the index it was found by lagged behind a write).
    NotDue,
    /// Its renewal is still pending or leased: look again later ([`IssuedCert::recheck`]).
    Wait,
    /// Its renewal was issued, but the pairing was not moved to it or this certificate not
    /// revoked (the result's follow-up did not finish): finish it.
    Finish,
    /// Queue a renewal: none was, or the last one failed or died.
    Queue,
}

fn envelope_v1() -> u8 {
    1
}

impl IssuedCert {
    /// Whether the certificate is withdrawn: revoked, or its revocation decided (queued, or
    /// asked for and to be queued again). Its holder must not use it from then on, before the
    /// agent has carried the revocation out.
    pub fn is_withdrawn(&self) -> bool {
        self.revoked_at.is_some() || self.revocation_request_id.is_some()
    }

    /// The certificate `issued` for `request`, as stored for its device.
    pub fn new(request: &CertRequest, issued: &LoginCertIssued, now: EpochMillis) -> Self {
        Self {
            cert_serial_number: issued.login_cert_serial_number.clone(),
            app_id: request.app_id.clone(),
            request_id: request.request_id.clone(),
            device_id: request.device_id.clone().unwrap_or_default(),
            named_user: request.machine_user_name.clone().unwrap_or_default(),
            machine_user_name_ws: issued
                .machine_user_name_ws
                .clone()
                .or(request.machine_user_name_ws.clone()),
            machine_user_names: issued.machine_user_names.clone(),
            login_cert: issued.login_cert.clone(),
            iv_login_cert: issued.iv_login_cert.clone(),
            login_cert_auth: issued.login_cert_auth.clone(),
            issuer_key_agreement_public_key: issued.issuer_key_agreement_public_key.clone(),
            issuer_key_agreement_public_key_auth: issued.issuer_key_agreement_public_key_auth.clone(),
            login_cert_expiry_date: issued.login_cert_expiry_date,
            signing_cert: issued.signing_cert.clone(),
            envelope_version: issued.envelope_version,
            login_cert_signature: issued.login_cert_signature.clone(),
            enc_counter: request.enc_counter.clone(),
            issued_at: now,
            revoked_at: None,
            revocation_request_id: None,
            renewal_request_id: None,
            renewal_check_at: None,
            renewed_by: None,
        }
    }

    /// When its last [`RENEWAL_WINDOW_PERCENT`] of life (from when it was stored to its expiry)
    /// begins.
    pub fn renewal_window_opens(&self) -> EpochMillis {
        let life = (self.login_cert_expiry_date.as_millis() - self.issued_at.as_millis()).max(0);
        EpochMillis(self.issued_at.as_millis() + life * (100 - RENEWAL_WINDOW_PERCENT) / 100)
    }

    /// When the renewal sweep is to look at it next; `None` once it is revoked, being revoked
    /// or replaced.
    pub fn renewal_check(&self) -> Option<EpochMillis> {
        if self.is_withdrawn() || self.renewed_by.is_some() {
            return None;
        }
        Some(self.renewal_check_at.unwrap_or_else(|| self.renewal_window_opens()))
    }

    /// What the sweep does at `now`, given the renewal queued last (`renewal`, read by
    /// [`Self::renewal_request_id`]; `None` if none was, or it is gone).
    pub fn renewal_step(&self, renewal: Option<&CertRequest>, now: EpochMillis) -> RenewalStep {
        match self.renewal_check() {
            None => RenewalStep::Done,
            Some(at) if now < at => RenewalStep::NotDue,
            Some(_) => match renewal
                .filter(|r| self.renewal_request_id.as_deref() == Some(&r.request_id))
                .map(|r| r.state)
            {
                None | Some(RequestState::Failed | RequestState::Dead) => RenewalStep::Queue,
                Some(RequestState::Pending | RequestState::Leased) => RenewalStep::Wait,
                Some(RequestState::Done) => RenewalStep::Finish,
            },
        }
    }

    /// The same certificate, looked at again once a renewal queued at `now` has had time to
    /// close: `timeout_secs` for each of `max_attempts` leases, and a minute more.
    pub fn recheck(&self, timeout_secs: i64, max_attempts: u32, now: EpochMillis) -> IssuedCert {
        let wait = timeout_secs.max(1) * i64::from(max_attempts.max(1)) + 60;
        self.check_again_at(now.plus_secs(wait))
    }

    /// The same certificate, looked at again by the renewal sweep at `at`.
    pub fn check_again_at(&self, at: EpochMillis) -> IssuedCert {
        IssuedCert { renewal_check_at: Some(at), ..self.clone() }
    }

    /// A renewal of this certificate, PENDING: a login-certificate request for the same device,
    /// user and workstation as `original` (the request it was issued for), under the device's
    /// next encryption counter, valid `validity_days`; and this certificate pointing at it, to be
    /// looked at again once the request has had time to close.
    pub fn queue_renewal(
        &self,
        original: &CertRequest,
        enc_counter: i64,
        validity_days: i64,
        timeout_secs: i64,
        max_attempts: u32,
        now: EpochMillis,
    ) -> (IssuedCert, CertRequest) {
        let request = CertRequest {
            machine_user_name_ws: original.machine_user_name_ws.clone(),
            machine_user_name: original.machine_user_name.clone(),
            device_id: Some(self.device_id.clone()),
            device_key_agreement_public_key: original.device_key_agreement_public_key.clone(),
            enc_counter: Some(enc_counter.to_string()),
            certificate_validity_days: Some(validity_days),
            machine_id: original.machine_id.clone(),
            renews: Some(self.cert_serial_number.clone()),
            ..CertRequest::new(RequestKind::LoginCert, self.app_id.clone(), timeout_secs, now)
        };
        let marked = IssuedCert {
            renewal_request_id: Some(request.request_id.clone()),
            ..self.recheck(timeout_secs, max_attempts, now)
        };
        (marked, request)
    }

    /// The same certificate marked revoked (the first revocation's time stays).
    pub fn revoked(&self, now: EpochMillis) -> Self {
        Self { revoked_at: Some(self.revoked_at.unwrap_or(now)), ..self.clone() }
    }

    /// A revocation request for this certificate, PENDING, and the certificate pointing at it.
    /// [`CertError::AlreadyRevoked`] if it is revoked already.
    pub fn queue_revocation(
        &self,
        request_timeout_in_secs: i64,
        now: EpochMillis,
    ) -> Result<(IssuedCert, CertRequest), CertError> {
        if self.revoked_at.is_some() {
            return Err(CertError::AlreadyRevoked(self.cert_serial_number.clone()));
        }
        let request = CertRequest {
            device_id: Some(self.device_id.clone()),
            cert_serial_number: Some(self.cert_serial_number.clone()),
            cert_expiry_date: Some(self.login_cert_expiry_date),
            ..CertRequest::new(RequestKind::Revocation, self.app_id.clone(), request_timeout_in_secs, now)
        };
        let marked = IssuedCert { revocation_request_id: Some(request.request_id.clone()), ..self.clone() };
        Ok((marked, request))
    }
}

/// A parsed result, of either endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct CertResult {
    pub request_id: String,
    /// SHA-256 of the body as posted (canonical field order), to recognise a repeat.
    pub digest: String,
    pub outcome: Outcome,
    kind: RequestKind,
}

impl CertResult {
    /// A result of `kind` for `request_id`, parsed; `digest` recognises a repeat of its body.
    pub fn new(request_id: String, digest: String, outcome: Outcome, kind: RequestKind) -> Self {
        Self { request_id, digest, outcome, kind }
    }

    pub fn kind(&self) -> RequestKind {
        self.kind
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `errorCode` > 0: the agent could not do it.
    Failed {
        error_code: i64,
        error_message: Option<String>,
    },
    Issued(Box<LoginCertIssued>),
    Revoked {
        cert_serial_number: String,
    },
}

impl Outcome {
    /// The certificate the result names: the new one's serial, or the revoked one's.
    pub fn serial(&self) -> Option<&str> {
        match self {
            Outcome::Failed { .. } => None,
            Outcome::Issued(issued) => Some(&issued.login_cert_serial_number),
            Outcome::Revoked { cert_serial_number } => Some(cert_serial_number),
        }
    }
}

/// The success payload of an issuance, every field checked.
#[derive(Debug, Clone, PartialEq)]
pub struct LoginCertIssued {
    pub login_cert: String,
    pub iv_login_cert: String,
    pub login_cert_auth: String,
    pub login_cert_serial_number: String,
    pub issuer_key_agreement_public_key: String,
    pub issuer_key_agreement_public_key_auth: String,
    pub signing_cert: String,
    pub login_cert_expiry_date: EpochMillis,
    pub machine_user_name_ws: Option<String>,
    pub machine_user_names: Vec<String>,
    /// 1 or 2 (`domain::envelope`).
    pub envelope_version: u8,
    /// Version 2's issuer signature.
    pub login_cert_signature: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::Failure;
    use proptest::prelude::*;

    const T0: EpochMillis = EpochMillis(1_000_000);

    #[test]
    fn every_app_with_work_gets_a_share() {
        assert_eq!(fair_share(50, 0), 0);
        assert_eq!(fair_share(50, 1), 50);
        assert_eq!(fair_share(50, 2), 25);
        assert_eq!(fair_share(50, 3), 17);
        assert_eq!(fair_share(50, 50), 1);
        assert_eq!(fair_share(1, 7), 1, "one each, the batch cut afterwards");
    }

    #[test]
    fn a_first_round_reads_at_least_the_share_and_about_twice_the_batch_at_most() {
        assert_eq!(first_round_reads(50, 0), 0);
        assert_eq!(first_round_reads(50, 1), 50, "one app: the batch");
        assert_eq!(first_round_reads(50, 2), 50, "two: either can fill the batch alone");
        assert_eq!(first_round_reads(50, 3), 34);
        assert_eq!(first_round_reads(50, 50), 2);
        for batch in 1..=100 {
            for apps in 1..=batch {
                let reads = first_round_reads(batch, apps);
                assert!(reads >= fair_share(batch, apps) && reads <= batch, "{batch} over {apps}");
                assert!(reads * apps <= 2 * batch + apps, "{batch} over {apps}: {reads} each");
            }
        }
    }

    fn pending() -> CertRequest {
        CertRequest::new(RequestKind::LoginCert, AppId::parse("appId", "demo").unwrap(), 300, T0)
    }

    fn failed_result(id: &str, code: i64) -> CertResult {
        let outcome = Outcome::Failed { error_code: code, error_message: Some("no".into()) };
        CertResult::new(id.to_owned(), format!("digest of {code}"), outcome, RequestKind::LoginCert)
    }

    #[test]
    fn a_lease_ends_at_the_timeout_and_counts_an_attempt() {
        let leased = pending().lease("L1", T0).unwrap();
        assert_eq!(leased.state, RequestState::Leased);
        assert_eq!(leased.attempts, 1);
        assert_eq!(leased.leased_until, Some(T0.plus_secs(300)));
        assert!(leased.lease("L2", T0).is_none(), "a leased request is not leased again");
    }

    #[test]
    fn expiry_requeues_until_the_last_attempt_then_dies() {
        let leased = pending().lease("L1", T0).unwrap();
        assert_eq!(leased.expire("other", 2, T0), Expiry::Ignored, "only the current lease");
        let Expiry::Requeued(again) = leased.expire("L1", 2, T0) else { panic!("re-queued") };
        assert_eq!((again.state, again.lease_id.as_deref()), (RequestState::Pending, None));
        let second = again.lease("L2", T0).unwrap();
        let Expiry::Dead(dead, event) = second.expire("L2", 2, T0) else { panic!("dead") };
        assert_eq!(dead.state, RequestState::Dead);
        assert_eq!(event.attributes["errorCode"], json!(DEAD_ERROR_CODE));
        assert_eq!(dead.lease_id.as_deref(), Some("L2"), "the lease that killed it");
        assert_eq!(dead.expire("L2", 2, T0), Expiry::AlreadyDead, "written once; its dead letter again");
        assert_eq!(dead.expire("L1", 2, T0), Expiry::Ignored, "an earlier lease's time-out");
    }

    #[test]
    fn results_are_accepted_only_within_the_lease() {
        let leased = pending().lease("L1", T0).unwrap();
        let result = failed_result(&leased.request_id, 42);
        let Settlement::Settled { request, event } = leased.settle(&result, "agent:x", T0, 5).unwrap() else {
            panic!("settled")
        };
        assert_eq!((request.state, request.error_code), (RequestState::Failed, Some(42)));
        assert_eq!(event.attributes["isSuccessful"], json!(false));
        assert_eq!(request.settle(&result, "agent:x", T0, 5).unwrap(), Settlement::Duplicate);
        let other = failed_result(&leased.request_id, 43);
        assert!(matches!(request.settle(&other, "agent:x", T0, 5), Err(CertError::ResultDiffers)));
        let late = leased.settle(&result, "agent:x", T0.plus_secs(300), 5).unwrap();
        assert!(matches!(late, Settlement::LeaseEnded(Expiry::Requeued(_))), "{late:?}");
        let last = leased.settle(&result, "agent:x", T0.plus_secs(300), 1).unwrap();
        assert!(
            matches!(last, Settlement::LeaseEnded(Expiry::Dead(..))),
            "max attempts is the caller's: {last:?}"
        );
        assert_eq!(pending().settle(&result, "a", T0, 5).unwrap(), Settlement::LeaseEnded(Expiry::Ignored));
    }

    #[test]
    fn a_result_of_the_other_kind_finds_no_request() {
        let leased = pending().lease("L1", T0).unwrap();
        let outcome = Outcome::Failed { error_code: 1, error_message: None };
        let result = CertResult::new(leased.request_id.clone(), "d".into(), outcome, RequestKind::Revocation);
        assert!(matches!(leased.settle(&result, "a", T0, 5), Err(CertError::RequestNotFound { .. })));
    }

    /// One step of an arbitrary history.
    #[derive(Debug, Clone)]
    enum Step {
        Lease,
        ExpireCurrent,
        ExpireStale,
        Result(bool),
        Advance(i64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::Lease),
            Just(Step::ExpireCurrent),
            Just(Step::ExpireStale),
            any::<bool>().prop_map(Step::Result),
            (0i64..400).prop_map(Step::Advance),
        ]
    }

    proptest! {
        /// Whatever happens, in any order: attempts never exceed the maximum, a DEAD request
        /// was leased that often, a settled request stays settled, and only a lease's own
        /// result within its window settles it.
        #[test]
        fn the_lifecycle_keeps_its_invariants(steps in proptest::collection::vec(step(), 0..40), max in 1u32..6) {
            let mut request = pending();
            let mut now = T0;
            let mut lease = 0;
            for step in steps {
                let before = request.clone();
                match step {
                    Step::Lease => {
                        lease += 1;
                        if let Some(next) = request.lease(&format!("L{lease}"), now) { request = next; }
                    }
                    Step::ExpireCurrent => {
                        let id = request.lease_id.clone().unwrap_or_default();
                        match request.expire(&id, max, now) {
                            Expiry::Requeued(next) | Expiry::Dead(next, _) => request = next,
                            Expiry::AlreadyDead => prop_assert_eq!(request.state, RequestState::Dead),
                            Expiry::Ignored => {}
                        }
                    }
                    Step::ExpireStale => prop_assert_eq!(request.expire("stale", max, now), Expiry::Ignored),
                    Step::Result(ok) => {
                        let result = failed_result(&request.request_id, if ok { 1 } else { 2 });
                        match request.settle(&result, "a", now, max) {
                            Ok(Settlement::Settled { request: next, .. }) => {
                                prop_assert!(before.state == RequestState::Leased);
                                prop_assert!(now < before.leased_until.unwrap());
                                request = next;
                            }
                            Ok(Settlement::LeaseEnded(Expiry::Requeued(next) | Expiry::Dead(next, _))) => request = next,
                            _ => {}
                        }
                    }
                    Step::Advance(secs) => now = now.plus_secs(secs),
                }
                prop_assert!(request.attempts <= max, "{:?}", request);
                if request.state == RequestState::Dead { prop_assert_eq!(request.attempts, max); }
                if matches!(before.state, RequestState::Done | RequestState::Failed | RequestState::Dead) {
                    prop_assert_eq!(&request, &before, "a final state is final");
                }
                let keeps_lease = matches!(request.state, RequestState::Leased | RequestState::Dead);
                prop_assert_eq!(request.lease_id.is_some(), keeps_lease, "{:?}", request);
            }
        }
    }

    fn issued(expires: EpochMillis) -> (CertRequest, IssuedCert) {
        let request = CertRequest {
            machine_user_name_ws: Some("CORP\\ada".into()),
            machine_user_name: Some("ada@example.com".into()),
            device_id: Some("d1".into()),
            device_key_agreement_public_key: Some("device-key".into()),
            enc_counter: Some("1".into()),
            machine_id: Some("m1".into()),
            ..pending()
        };
        let stored = IssuedCert::new(&request, &issued_payload(expires), T0);
        (request, stored)
    }

    fn issued_payload(expires: EpochMillis) -> LoginCertIssued {
        LoginCertIssued {
            login_cert: "c".into(),
            iv_login_cert: "iv".into(),
            login_cert_auth: "a".into(),
            login_cert_serial_number: "0a".into(),
            issuer_key_agreement_public_key: "k".into(),
            issuer_key_agreement_public_key_auth: "ka".into(),
            signing_cert: "s".into(),
            login_cert_expiry_date: expires,
            machine_user_name_ws: None,
            machine_user_names: vec![],
            envelope_version: 2,
            login_cert_signature: None,
        }
    }

    #[test]
    fn the_renewal_window_is_the_last_fifth_of_the_life_from_when_it_was_stored() {
        let (_, cert) = issued(T0.plus_secs(100_000));
        assert_eq!(cert.renewal_window_opens(), T0.plus_secs(80_000));
        assert_eq!(cert.renewal_check(), Some(T0.plus_secs(80_000)));
        assert_eq!(cert.renewal_step(None, T0.plus_secs(79_999)), RenewalStep::NotDue);
        assert_eq!(cert.renewal_step(None, T0.plus_secs(80_000)), RenewalStep::Queue);
        // Already expired when stored: due at once.
        let (_, expired) = issued(EpochMillis(T0.as_millis() - 1));
        assert_eq!(expired.renewal_window_opens(), T0);
        // Revoked, being revoked, or replaced: never again.
        for gone in [
            cert.revoked(T0),
            IssuedCert { revocation_request_id: Some("r".into()), ..cert.clone() },
            IssuedCert { renewed_by: Some("0b".into()), ..cert.clone() },
        ] {
            assert_eq!(gone.renewal_check(), None);
            assert_eq!(gone.renewal_step(None, T0.plus_secs(90_000)), RenewalStep::Done);
        }
    }

    #[test]
    fn a_renewal_is_the_same_pairings_request_under_a_new_counter() {
        let (original, cert) = issued(T0.plus_secs(100_000));
        let now = T0.plus_secs(80_000);
        let (marked, renewal) = cert.queue_renewal(&original, 7, 30, 300, 5, now);
        assert_eq!((renewal.kind, renewal.state), (RequestKind::LoginCert, RequestState::Pending));
        assert_ne!(renewal.request_id, original.request_id);
        assert_eq!(renewal.renews.as_deref(), Some("0a"));
        assert_eq!(renewal.enc_counter.as_deref(), Some("7"));
        assert_eq!(renewal.certificate_validity_days, Some(30));
        for (a, b) in [
            (&renewal.machine_user_name_ws, &original.machine_user_name_ws),
            (&renewal.machine_user_name, &original.machine_user_name),
            (&renewal.device_id, &original.device_id),
            (&renewal.device_key_agreement_public_key, &original.device_key_agreement_public_key),
            (&renewal.machine_id, &original.machine_id),
        ] {
            assert_eq!(a, b);
        }
        assert_eq!(marked.renewal_request_id.as_deref(), Some(renewal.request_id.as_str()));
        // Looked at again once five leases of 300 s could have ended.
        assert_eq!(marked.renewal_check(), Some(now.plus_secs(5 * 300 + 60)));
    }

    #[test]
    fn a_revocation_carries_what_the_agent_revokes_by_and_never_counts_against_the_cap() {
        let (_, cert) = issued(T0.plus_secs(100_000));
        let (marked, revocation) = cert.queue_revocation(120, T0).unwrap();
        assert_eq!((revocation.kind, revocation.state), (RequestKind::Revocation, RequestState::Pending));
        assert_eq!(revocation.device_id.as_deref(), Some("d1"));
        assert_eq!(revocation.cert_serial_number.as_deref(), Some("0a"));
        assert_eq!(revocation.cert_expiry_date, Some(T0.plus_secs(100_000)));
        assert_eq!(revocation.lease_duration(), Duration::from_secs(120));
        assert_eq!(marked.revocation_request_id.as_deref(), Some(revocation.request_id.as_str()));
        assert!(marked.is_withdrawn() && !cert.is_withdrawn());
        assert!(pending().counts_against_cap());
        assert!(!revocation.counts_against_cap(), "a full queue must not hold up a revocation");
        let again = marked.revoked(T0).queue_revocation(120, T0);
        assert!(matches!(again, Err(CertError::AlreadyRevoked(serial)) if serial == "0a"));
    }

    #[test]
    fn a_revocation_result_must_name_the_certificate_it_revokes() {
        let (_, cert) = issued(T0.plus_secs(100_000));
        let leased = cert.queue_revocation(300, T0).unwrap().1.lease("L1", T0).unwrap();
        let revoked = |serial: &str| {
            let outcome = Outcome::Revoked { cert_serial_number: serial.into() };
            CertResult::new(
                leased.request_id.clone(),
                format!("digest {serial}"),
                outcome,
                RequestKind::Revocation,
            )
        };
        let Err(CertError::Failed(Failure::Invalid(refused))) =
            leased.settle(&revoked("0b"), "agent:x", T0, 5)
        else {
            panic!("another certificate's serial is refused")
        };
        assert_eq!(refused.field, "certSerialNumber");
        let Settlement::Settled { request, event } = leased.settle(&revoked("0a"), "agent:x", T0, 5).unwrap()
        else {
            panic!("settled")
        };
        assert_eq!(request.state, RequestState::Done);
        assert!(request.is_closed());
        assert_eq!(event.name, "WS_CERTIFICATE_REVOKED");
        assert_eq!(event.attributes["certSerialNumber"], json!("0a"));
        assert_eq!(revoked("0a").outcome.serial(), Some("0a"));
    }

    #[test]
    fn only_done_failed_and_dead_requests_are_closed() {
        for (state, closed) in [
            (RequestState::Pending, false),
            (RequestState::Leased, false),
            (RequestState::Done, true),
            (RequestState::Failed, true),
            (RequestState::Dead, true),
        ] {
            assert_eq!(CertRequest { state, ..pending() }.is_closed(), closed, "{state:?}");
        }
    }

    #[test]
    fn an_unknown_request_is_named_by_its_kind() {
        let missing = |kind| CertError::RequestNotFound { kind, id: "r1".into() }.to_string();
        assert_eq!(missing(RequestKind::LoginCert), "requestId: no login-certificate request 'r1'");
        assert_eq!(missing(RequestKind::Revocation), "requestId: no revocation request 'r1'");
    }

    #[test]
    fn an_issued_certificate_names_its_serial_and_older_ones_read_as_envelope_version_1() {
        let (_, cert) = issued(T0.plus_secs(100_000));
        assert_eq!(Outcome::Issued(Box::new(issued_payload(T0))).serial(), Some("0a"));
        assert_eq!(Outcome::Failed { error_code: 1, error_message: None }.serial(), None);
        assert_eq!(cert.envelope_version, 2);
        let mut stored = serde_json::to_value(&cert).unwrap();
        stored.as_object_mut().unwrap().remove("envelopeVersion");
        let older: IssuedCert = serde_json::from_value(stored).unwrap();
        assert_eq!(older.envelope_version, 1);
    }

    #[test]
    fn a_certificate_status_follows_the_certificate_of_that_request_then_the_request() {
        let (request, cert) = issued(T0.plus_secs(100_000));
        let id = request.request_id.as_str();
        let state_of = |request: &CertRequest, issued: &[IssuedCert]| {
            certificate_status(Some(request), id, issued).state
        };
        assert_eq!(state_of(&request, &[]), CertificateState::Pending);
        let in_state = |state| CertRequest { state, ..request.clone() };
        assert_eq!(state_of(&in_state(RequestState::Failed), &[]), CertificateState::Failed);
        assert_eq!(state_of(&in_state(RequestState::Dead), &[]), CertificateState::Failed);
        assert_eq!(certificate_status(None, id, &[]).state, CertificateState::Pending);
        let other = IssuedCert { request_id: "another".into(), ..cert.clone() };
        assert_eq!(
            state_of(&in_state(RequestState::Done), std::slice::from_ref(&other)),
            CertificateState::Pending
        );
        let status = certificate_status(Some(&in_state(RequestState::Done)), id, &[other, cert.clone()]);
        assert_eq!(status.state, CertificateState::Issued);
        assert_eq!(status.serial.as_deref(), Some("0a"));
        assert_eq!(status.expires_at, Some(T0.plus_secs(100_000)));
        assert_eq!(status.issuer_certificate.as_deref(), Some("s"));
        let withdrawn = IssuedCert { revocation_request_id: Some("r".into()), ..cert.clone() };
        assert_eq!(state_of(&request, &[withdrawn]), CertificateState::Revoked, "decided is enough");
        assert_eq!(state_of(&request, &[cert.revoked(T0)]), CertificateState::Revoked);
    }

    #[test]
    fn what_the_sweep_does_follows_the_state_of_the_last_renewal() {
        let (original, cert) = issued(T0.plus_secs(100_000));
        let (marked, renewal) = cert.queue_renewal(&original, 2, 30, 300, 5, T0.plus_secs(80_000));
        let later = T0.plus_secs(90_000);
        assert_eq!(marked.renewal_step(Some(&renewal), T0.plus_secs(80_001)), RenewalStep::NotDue);
        let in_state = |state| CertRequest { state, ..renewal.clone() };
        assert_eq!(marked.renewal_step(Some(&in_state(RequestState::Pending)), later), RenewalStep::Wait);
        assert_eq!(marked.renewal_step(Some(&in_state(RequestState::Leased)), later), RenewalStep::Wait);
        assert_eq!(marked.renewal_step(Some(&in_state(RequestState::Done)), later), RenewalStep::Finish);
        assert_eq!(marked.renewal_step(Some(&in_state(RequestState::Failed)), later), RenewalStep::Queue);
        assert_eq!(marked.renewal_step(Some(&in_state(RequestState::Dead)), later), RenewalStep::Queue);
        assert_eq!(marked.renewal_step(None, later), RenewalStep::Queue, "its request is gone");
        // Another request than the one it points at says nothing about it.
        let other = CertRequest { state: RequestState::Done, ..pending() };
        assert_eq!(marked.renewal_step(Some(&other), later), RenewalStep::Queue);
    }
}

/// Where a pairing's login certificate stands, as its workstation sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertificateState {
    /// Queued or with the agent.
    Pending,
    Issued,
    /// Revoked, or its revocation queued ([`IssuedCert::is_withdrawn`]).
    Revoked,
    /// The agent reported a failure, or the request ran out of attempts.
    Failed,
}

/// The pairing's certificate: its state and, once issued, its serial, expiry and the issuing CA
/// certificate; never key material.
#[derive(Debug, Clone, PartialEq)]
pub struct CertificateStatus {
    pub state: CertificateState,
    pub serial: Option<String>,
    pub expires_at: Option<EpochMillis>,
    /// The issuing CA's certificate, as the agent posted it (base64 DER).
    pub issuer_certificate: Option<String>,
}

/// The status of the certificate requested as `request` (if still stored), from the device's
/// issued certificates `issued`.
pub fn certificate_status(
    request: Option<&CertRequest>,
    request_id: &str,
    issued: &[IssuedCert],
) -> CertificateStatus {
    let cert = issued.iter().find(|c| c.request_id == request_id);
    let state = match (cert, request.map(|r| r.state)) {
        (Some(cert), _) if cert.is_withdrawn() => CertificateState::Revoked,
        (Some(_), _) => CertificateState::Issued,
        (None, Some(RequestState::Failed | RequestState::Dead)) => CertificateState::Failed,
        (None, _) => CertificateState::Pending,
    };
    CertificateStatus {
        state,
        serial: cert.map(|c| c.cert_serial_number.clone()),
        expires_at: cert.map(|c| c.login_cert_expiry_date),
        issuer_certificate: cert.map(|c| c.signing_cert.clone()),
    }
}
