//! Out-of-band authentication (workstation-api.md, "OOB"; DECISIONS §6) as pure functions.
//!
//! REQUEST_SENT (start) → INITIATED (the device first fetches it) → INITIATED_RESPONSE (the device
//! answers) → COMPLETED (approved, signature valid, amount matched) | CANCELED (declined, signature
//! valid) | FAILED (bad signature or wrong amount). A request past its expiry without a final
//! state, or any request past its expiry, is not found (1201013).
//!
//! The device signs, with its registered P-256 signing key (ECDSA, SHA-256), the canonical byte
//! string of [`canonical_bytes`]: the tag `rp-oob-v1`, then nine fields each as a 4-byte
//! big-endian length and its UTF-8 bytes.

use super::apps::AppId;
use super::devices::DeviceRecord;
use super::events::{EventRecord, OOB_EVENT};
use super::time::EpochMillis;
use super::validate::{self, FieldError};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use p256::ecdsa::Signature;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;

pub const MAX_TRANSACTION_TEXT: usize = 1000;
pub const MAX_ADDITIONAL_DETAILS: usize = 20;
/// The tag that starts the signed byte string.
pub const SIGNATURE_TAG: &[u8] = b"rp-oob-v1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OobState {
    RequestSent,
    Initiated,
    InitiatedResponse,
    Completed,
    Failed,
    Canceled,
}

impl OobState {
    pub fn is_final(self) -> bool {
        matches!(self, OobState::Completed | OobState::Failed | OobState::Canceled)
    }
}

/// One entry of the status response's `state` array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateEntry {
    pub value: OobState,
    pub message: String,
    pub timestamp: EpochMillis,
}

/// `extras`: a confirmation code the user must type on the phone (number matching).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Extras {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<String>,
}

/// The device a request goes to, as it was when the request started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OobDevice {
    pub device_id: String,
    pub friendly_name: String,
    pub model_number: String,
    /// SEC1 uncompressed, base64: the key the answer must be signed with.
    pub signing_public_key: String,
}

/// The four 64-hex-digit values of a start request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nonces {
    pub session_nonce: String,
    pub device_nonce: String,
    pub service_nonce: String,
    pub service_hmac: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OobRequest {
    pub request_id: String,
    pub app_id: AppId,
    pub named_user: String,
    pub machine: Option<String>,
    pub machine_id: Option<String>,
    pub device: OobDevice,
    pub nonces: Nonces,
    pub transaction_text: Option<String>,
    pub transaction_type: Option<String>,
    pub extras: Option<Extras>,
    #[serde(default)]
    pub additional_details: BTreeMap<String, String>,
    pub created_at: EpochMillis,
    pub expires_at: EpochMillis,
    pub state: Vec<StateEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Decision {
    Approve,
    Decline,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Decline => "decline",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OobError {
    /// Unknown, another app's or another device's, expired, or answered by a device whose
    /// removal (or token's end) began (the seed's 1201013).
    #[error("the OOB authentication request could not be found")]
    NotFound,
    #[error("namedUser: no registered user has this name")]
    UnknownUser,
    #[error("namedUser: the user has no registered device that can answer")]
    NoDevice,
    #[error("deviceId: names none of the user's registered devices")]
    UnknownDevice,
    #[error(
        "deviceId: the device's token has ended or expired, so it cannot answer; it must register again"
    )]
    DeviceCannotAnswer,
    #[error("sessionNonce: this nonce was used before")]
    NonceReused,
    #[error("requestId: the request was answered already")]
    AlreadyAnswered,
    #[error("signature: does not verify with the device's registered signing key")]
    BadSignature,
    #[error("amount: does not match the code shown by the service")]
    WrongAmount,
    /// An `oob.start` code customization denied the start; the reason is its own words.
    #[error("denied by a code customization: {0}")]
    Denied(String),
    /// An `oob.start` code customization failed: the start fails closed. The error is not
    /// shown (it may describe the tenant's code); the event carries it.
    #[error("code customization {id} failed; the start is refused")]
    HookFailed { id: i64 },
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(OobError);

/// Longest key and value of an OOB start's `additionalDetails`.
pub const MAX_DETAIL_KEY: usize = 64;
pub const MAX_DETAIL_VALUE: usize = 500;

/// A start request, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct OobStart {
    pub app_id: AppId,
    pub named_user: String,
    pub nonces: Nonces,
    pub machine: Option<String>,
    pub machine_id: Option<String>,
    pub device_id: Option<String>,
    pub transaction_text: Option<String>,
    pub transaction_type: Option<String>,
    pub extras: Option<Extras>,
    pub additional_details: BTreeMap<String, String>,
}

/// The device a start goes to at `now`, of the user's `devices` (most recently registered
/// last): the one `device_id` names (an error when it names none of them, or one that cannot
/// answer); else the one `machine_id` names, since the device list gives each device's id as its
/// `machineId`; else, as a `machineId` that names no device (a workstation's, or a caller's
/// own) does, the most recently registered. Unnamed, a device whose token ended or expired is
/// passed over: it could never fetch the request.
pub fn choose_device(
    devices: Vec<DeviceRecord>,
    device_id: Option<&str>,
    machine_id: Option<&str>,
    now: EpochMillis,
) -> Result<DeviceRecord, OobError> {
    if let Some(id) = device_id {
        let named = devices.into_iter().find(|d| d.device_id == id).ok_or(OobError::UnknownDevice)?;
        return if named.can_answer(now) { Ok(named) } else { Err(OobError::DeviceCannotAnswer) };
    }
    let mut able: Vec<DeviceRecord> = devices.into_iter().filter(|d| d.can_answer(now)).collect();
    match machine_id.and_then(|id| able.iter().position(|d| d.device_id == id)) {
        Some(at) => Ok(able.swap_remove(at)),
        None => able.pop().ok_or(OobError::NoDevice),
    }
}

/// The version of the answer protocol (the signed message of [`answer_message`]) a device
/// speaks: the device list's `protocolVersion`.
pub const PROTOCOL_VERSION: &str = "1";

/// Exactly 64 hexadecimal characters, kept lowercase.
pub fn nonce(field: &str, value: &str) -> Result<String, FieldError> {
    if value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(value.to_ascii_lowercase())
    } else {
        Err(FieldError::new(field, "must be exactly 64 hexadecimal characters"))
    }
}

/// A device's answer, checked: the signature decodes (DER or raw r‖s, base64 or base64url).
#[derive(Debug, Clone, PartialEq)]
pub struct OobAnswer {
    pub decision: Decision,
    pub signature: Signature,
    pub amount: Option<String>,
}

impl OobAnswer {
    /// A device's answer, checked: the signature decodes (DER or raw r‖s, base64 or base64url).
    pub fn parse(decision: Decision, signature: &str, amount: Option<String>) -> Result<Self, FieldError> {
        let bad = || FieldError::new("signature", "must be an ECDSA P-256 signature (DER or r||s), base64");
        let trimmed = signature.trim_end_matches('=');
        let bytes =
            STANDARD.decode(signature).or_else(|_| URL_SAFE_NO_PAD.decode(trimmed)).map_err(|_| bad())?;
        let signature = match bytes.len() {
            64 => Signature::from_slice(&bytes),
            _ => Signature::from_der(&bytes),
        }
        .map_err(|_| bad())?;
        if let Some(amount) = &amount {
            validate::text("amount", amount, 1, 64)?;
        }
        Ok(Self { decision, signature, amount })
    }
}

/// The byte string a device signs: `rp-oob-v1`, then each of requestId, sessionNonce,
/// deviceNonce, serviceNonce, serviceHmac, transactionText, extras.amount (as shown),
/// amount (as typed) and the decision, as a u32 big-endian byte length and its UTF-8 bytes.
/// Absent values are empty strings.
pub fn canonical_bytes(request: &OobRequest, decision: Decision, typed_amount: Option<&str>) -> Vec<u8> {
    let shown = request.extras.as_ref().and_then(|e| e.amount.as_deref());
    answer_message(&request.request_id, &request.nonces, request.transaction_text.as_deref(), shown)
        .signed(decision, typed_amount)
}

/// What a device signs its answer over, taken from the request as it was handed to the device:
/// a phone builds it from the fields it fetched, the service from the stored request.
pub struct AnswerMessage<'a> {
    fields: [&'a str; 7],
}

/// The request's part of [`canonical_bytes`]: its id, nonces, transaction text and the amount
/// shown (number matching), each as fetched.
pub fn answer_message<'a>(
    request_id: &'a str,
    nonces: &'a Nonces,
    transaction_text: Option<&'a str>,
    shown_amount: Option<&'a str>,
) -> AnswerMessage<'a> {
    AnswerMessage {
        fields: [
            request_id,
            &nonces.session_nonce,
            &nonces.device_nonce,
            &nonces.service_nonce,
            &nonces.service_hmac,
            transaction_text.unwrap_or_default(),
            shown_amount.unwrap_or_default(),
        ],
    }
}

impl AnswerMessage<'_> {
    /// The bytes signed for `decision` with the amount the user typed.
    pub fn signed(&self, decision: Decision, typed_amount: Option<&str>) -> Vec<u8> {
        let mut out = SIGNATURE_TAG.to_vec();
        for field in self.fields.iter().copied().chain([typed_amount.unwrap_or_default(), decision.as_str()])
        {
            out.extend_from_slice(&(field.len() as u32).to_be_bytes());
            out.extend_from_slice(field.as_bytes());
        }
        out
    }
}

/// Checks `signature` over `message` against a base64 SEC1 P-256 public key. aws-lc-rs does the
/// check: measured 4.4 to 5.4 times faster than `p256` here (`cargo bench -p rp-shared --bench oob`).
pub fn verify(public_key_b64: &str, message: &[u8], signature: &Signature) -> bool {
    let Ok(bytes) = STANDARD.decode(public_key_b64) else { return false };
    let key =
        aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED, bytes);
    key.verify(message, &signature.to_bytes()).is_ok()
}

/// What a device's answer does.
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerOutcome {
    /// The answer settles the request.
    New(Box<Answered>),
    /// The request is settled by this same answer already (the device sends it again when the
    /// reply to it was lost): the device is told the outcome again, and nothing changes.
    Again,
}

/// A first answer's effects.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// The request with INITIATED_RESPONSE and its final state.
    pub request: OobRequest,
    /// The final state's event.
    pub event: EventRecord,
    /// Why it failed, if it did: the device is told with this error.
    pub failure: Option<OobErrorKind>,
}

/// Why an answer failed (the request is FAILED then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OobErrorKind {
    BadSignature,
    WrongAmount,
}

/// The longest id a request is looked up by: ids are UUIDs (36 characters), so a longer one
/// names no request.
pub const MAX_REQUEST_ID: usize = 64;

impl OobRequest {
    /// A new request for `device`, in REQUEST_SENT, readable for `ttl_secs`.
    pub fn start(start: OobStart, device: OobDevice, ttl_secs: i64, now: EpochMillis) -> Self {
        Self {
            request_id: uuid::Uuid::new_v4().to_string(),
            app_id: start.app_id,
            named_user: start.named_user,
            machine: start.machine,
            machine_id: start.machine_id,
            device,
            nonces: start.nonces,
            transaction_text: start.transaction_text,
            transaction_type: start.transaction_type,
            extras: start.extras,
            additional_details: start.additional_details,
            created_at: now,
            expires_at: now.plus_secs(ttl_secs),
            state: vec![StateEntry {
                value: OobState::RequestSent,
                message: "Request sent to the device".into(),
                timestamp: now,
            }],
        }
    }

    pub fn current(&self) -> OobState {
        self.state.last().map_or(OobState::RequestSent, |s| s.value)
    }

    pub fn is_final(&self) -> bool {
        self.current().is_final()
    }

    /// Whether the request can still be read or answered at `now`.
    pub fn is_live(&self, now: EpochMillis) -> bool {
        now < self.expires_at
    }

    /// The request as `app` may read it at `now`: another app's, or an expired one, is not found.
    pub fn visible_to(self, app: &AppId, now: EpochMillis) -> Result<Self, OobError> {
        if &self.app_id == app && self.is_live(now) {
            Ok(self)
        } else {
            Err(OobError::NotFound)
        }
    }

    /// The device's first fetch: INITIATED, once. `None` when there is nothing to change.
    pub fn fetched(&self, now: EpochMillis) -> Option<Self> {
        if self.current() != OobState::RequestSent || !self.is_live(now) {
            return None;
        }
        let mut next = self.clone();
        next.push(OobState::Initiated, "The device fetched the request", now);
        Some(next)
    }

    fn push(&mut self, value: OobState, message: &str, now: EpochMillis) {
        let timestamp = self.state.last().map_or(now, |s| s.timestamp.max(now));
        self.state.push(StateEntry { value, message: message.into(), timestamp });
    }

    /// The device `device_id` answers at `now`. The answer is checked against the key the
    /// request was sent with; a bad signature or a wrong amount makes the request FAILED. Once
    /// answered, the request takes the answer that settled it again ([`AnswerOutcome::Again`])
    /// and refuses any other.
    pub fn answer(
        &self,
        device_id: &str,
        answer: &OobAnswer,
        now: EpochMillis,
    ) -> Result<AnswerOutcome, OobError> {
        if self.device.device_id != device_id || !self.is_live(now) {
            return Err(OobError::NotFound);
        }
        let failure = self.failure_of(answer);
        if self.is_final() || self.current() == OobState::InitiatedResponse {
            let settled_by_it = failure.is_none() && self.current() == Self::settled(answer.decision);
            return if settled_by_it { Ok(AnswerOutcome::Again) } else { Err(OobError::AlreadyAnswered) };
        }
        let mut next = self.clone();
        if next.current() == OobState::RequestSent {
            next.push(OobState::Initiated, "The device fetched the request", now);
        }
        next.push(OobState::InitiatedResponse, "The device answered", now);
        let (state, text) = match (failure, answer.decision) {
            (Some(OobErrorKind::BadSignature), _) => {
                (OobState::Failed, "The answer's signature is not valid")
            }
            (Some(OobErrorKind::WrongAmount), _) => (OobState::Failed, "The code entered does not match"),
            (None, Decision::Approve) => (OobState::Completed, "The user approved the request"),
            (None, Decision::Decline) => (OobState::Canceled, "The user declined the request"),
        };
        next.push(state, text, now);
        let mut attributes = serde_json::Map::new();
        attributes.insert("requestId".into(), json!(self.request_id));
        attributes.insert("state".into(), json!(state));
        attributes.insert("deviceId".into(), json!(self.device.device_id));
        attributes.insert("namedUser".into(), json!(self.named_user));
        let event = EventRecord::new(
            OOB_EVENT,
            Some(self.app_id.clone()),
            format!("device:{device_id}"),
            now,
            attributes,
        );
        Ok(AnswerOutcome::New(Box::new(Answered { request: next, event, failure })))
    }

    /// Why `answer` fails this request, if it does: its signature does not verify with the
    /// request's key, or it approves another amount than the one shown.
    fn failure_of(&self, answer: &OobAnswer) -> Option<OobErrorKind> {
        let message = canonical_bytes(self, answer.decision, answer.amount.as_deref());
        let shown = self.extras.as_ref().and_then(|e| e.amount.as_deref());
        if !verify(&self.device.signing_public_key, &message, &answer.signature) {
            Some(OobErrorKind::BadSignature)
        } else if answer.decision == Decision::Approve && shown.is_some() && shown != answer.amount.as_deref()
        {
            Some(OobErrorKind::WrongAmount)
        } else {
            None
        }
    }

    /// The final state a valid answer of `decision` settles a request in.
    fn settled(decision: Decision) -> OobState {
        match decision {
            Decision::Approve => OobState::Completed,
            Decision::Decline => OobState::Canceled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::signature::Signer;
    use p256::ecdsa::SigningKey;
    use proptest::prelude::*;

    const T0: EpochMillis = EpochMillis(1_700_000_000_000);

    fn key() -> SigningKey {
        SigningKey::random(&mut rand::rngs::OsRng)
    }

    fn request(key: &SigningKey, amount: Option<&str>) -> OobRequest {
        let public = STANDARD.encode(key.verifying_key().to_encoded_point(false).as_bytes());
        let start = OobStart {
            app_id: AppId::parse("appId", "demo").unwrap(),
            named_user: "alice".into(),
            nonces: Nonces {
                session_nonce: "a".repeat(64),
                device_nonce: "b".repeat(64),
                service_nonce: "c".repeat(64),
                service_hmac: "d".repeat(64),
            },
            machine: Some("WS-1".into()),
            machine_id: None,
            device_id: None,
            transaction_text: Some("Log in to WS-1?".into()),
            transaction_type: None,
            extras: amount.map(|a| Extras { amount: Some(a.into()) }),
            additional_details: BTreeMap::new(),
        };
        let device = OobDevice {
            device_id: "d1".into(),
            friendly_name: "phone".into(),
            model_number: "m".into(),
            signing_public_key: public,
        };
        OobRequest::start(start, device, 300, T0)
    }

    fn signed(key: &SigningKey, r: &OobRequest, decision: Decision, amount: Option<&str>) -> OobAnswer {
        let signature: Signature = key.sign(&canonical_bytes(r, decision, amount));
        OobAnswer { decision, signature, amount: amount.map(str::to_owned) }
    }

    /// The effects of a first answer.
    fn new(outcome: Result<AnswerOutcome, OobError>) -> Answered {
        match outcome {
            Ok(AnswerOutcome::New(answered)) => *answered,
            other => panic!("not a first answer: {other:?}"),
        }
    }

    fn states(r: &OobRequest) -> Vec<OobState> {
        r.state.iter().map(|s| s.value).collect()
    }

    #[test]
    fn a_nonce_is_64_hexadecimal_characters_kept_lowercase() {
        let upper = "AB".repeat(32);
        assert_eq!(nonce("sessionNonce", &upper).unwrap(), "ab".repeat(32));
        for bad in ["a".repeat(63), "a".repeat(65), format!("{}g", "a".repeat(63)), String::new()] {
            assert_eq!(nonce("sessionNonce", &bad).unwrap_err().field, "sessionNonce", "{bad:?}");
        }
    }

    #[test]
    fn an_approval_signed_by_the_device_completes() {
        let k = key();
        let r = request(&k, None);
        let fetched = r.fetched(T0).unwrap();
        assert!(fetched.fetched(T0).is_none(), "INITIATED once");
        let approval = signed(&k, &r, Decision::Approve, None);
        let done = new(fetched.answer("d1", &approval, T0));
        assert_eq!(done.failure, None);
        use OobState::*;
        assert_eq!(states(&done.request), [RequestSent, Initiated, InitiatedResponse, Completed]);
        assert_eq!(done.event.attributes["state"], json!("COMPLETED"));
        // The same approval again (its reply was lost), or signed anew: told again, nothing changes.
        for again in [approval, signed(&k, &r, Decision::Approve, None)] {
            assert_eq!(done.request.answer("d1", &again, T0).unwrap(), AnswerOutcome::Again);
        }
        // Any other answer is refused: a decline, a forged approval, another device's.
        for other in [signed(&k, &r, Decision::Decline, None), signed(&key(), &r, Decision::Approve, None)] {
            assert!(matches!(done.request.answer("d1", &other, T0), Err(OobError::AlreadyAnswered)));
        }
        let approval = signed(&k, &r, Decision::Approve, None);
        assert!(matches!(done.request.answer("d2", &approval, T0), Err(OobError::NotFound)));
    }

    #[test]
    fn a_settled_request_takes_only_the_answer_that_settled_it_again() {
        let k = key();
        let r = request(&k, Some("42"));
        let declined = new(r.answer("d1", &signed(&k, &r, Decision::Decline, None), T0)).request;
        let decline = signed(&k, &r, Decision::Decline, None);
        assert_eq!(declined.answer("d1", &decline, T0).unwrap(), AnswerOutcome::Again);
        let approval = signed(&k, &r, Decision::Approve, Some("42"));
        assert!(matches!(declined.answer("d1", &approval, T0), Err(OobError::AlreadyAnswered)));

        let approved = new(r.answer("d1", &approval, T0)).request;
        assert_eq!(approved.answer("d1", &approval, T0).unwrap(), AnswerOutcome::Again);
        let other_amount = signed(&k, &r, Decision::Approve, Some("41"));
        assert!(matches!(approved.answer("d1", &other_amount, T0), Err(OobError::AlreadyAnswered)));
        // A failed request was told its failure: nothing settles it again.
        let failed = new(r.answer("d1", &other_amount, T0)).request;
        assert_eq!(failed.current(), OobState::Failed);
        for again in [&other_amount, &approval, &decline] {
            assert!(matches!(failed.answer("d1", again, T0), Err(OobError::AlreadyAnswered)));
        }
        // Past its expiry nothing is found, a repeat neither.
        let late = approved.expires_at;
        assert!(matches!(approved.answer("d1", &approval, late), Err(OobError::NotFound)));
    }

    #[test]
    fn declines_cancel_and_bad_signatures_or_numbers_fail() {
        let k = key();
        let r = request(&k, Some("42"));
        let declined = new(r.answer("d1", &signed(&k, &r, Decision::Decline, None), T0));
        assert_eq!(declined.request.current(), OobState::Canceled);
        let forged = new(r.answer("d1", &signed(&key(), &r, Decision::Approve, Some("42")), T0));
        assert_eq!(
            (forged.request.current(), forged.failure),
            (OobState::Failed, Some(OobErrorKind::BadSignature))
        );
        let wrong = new(r.answer("d1", &signed(&k, &r, Decision::Approve, Some("41")), T0));
        assert_eq!(
            (wrong.request.current(), wrong.failure),
            (OobState::Failed, Some(OobErrorKind::WrongAmount))
        );
        let right = new(r.answer("d1", &signed(&k, &r, Decision::Approve, Some("42")), T0));
        assert_eq!(right.request.current(), OobState::Completed);
        // A signature over another decision, or another request, does not carry over.
        let mut swapped = signed(&k, &r, Decision::Decline, Some("42"));
        swapped.decision = Decision::Approve;
        assert_eq!(new(r.answer("d1", &swapped, T0)).failure, Some(OobErrorKind::BadSignature));
    }

    #[test]
    fn expiry_other_devices_and_other_apps_are_not_found() {
        let k = key();
        let r = request(&k, None);
        let answer = signed(&k, &r, Decision::Approve, None);
        assert!(matches!(r.answer("d1", &answer, T0.plus_secs(300)), Err(OobError::NotFound)));
        assert!(matches!(r.answer("d2", &answer, T0), Err(OobError::NotFound)));
        let other = AppId::parse("appId", "other").unwrap();
        assert!(matches!(r.clone().visible_to(&other, T0), Err(OobError::NotFound)));
        assert!(matches!(
            r.clone().visible_to(&r.app_id.clone(), T0.plus_secs(300)),
            Err(OobError::NotFound)
        ));
        assert!(r.fetched(T0.plus_secs(300)).is_none());
    }

    #[test]
    fn signatures_decode_from_der_or_raw() {
        let k = key();
        let sig: Signature = k.sign(b"x");
        for text in [
            STANDARD.encode(sig.to_bytes()),
            STANDARD.encode(sig.to_der().as_bytes()),
            URL_SAFE_NO_PAD.encode(sig.to_bytes()),
        ] {
            let a = OobAnswer::parse(Decision::Approve, &text, None);
            assert_eq!(a.unwrap().signature, sig);
        }
        let bad = OobAnswer::parse(Decision::Approve, "bm90IGEgc2ln", None);
        assert_eq!(bad.unwrap_err().field, "signature");
    }

    proptest! {
        /// The canonical string is injective over its fields: moving bytes between fields
        /// changes it, so a signature covers each field as itself.
        #[test]
        fn canonical_bytes_separate_their_fields(a in "[a-z\\n]{0,8}", b in "[a-z\\n]{0,8}") {
            let k = key();
            let mut r1 = request(&k, Some(&format!("{a}x")));
            r1.transaction_text = Some(b.clone());
            let mut r2 = r1.clone();
            r2.transaction_text = Some(format!("{b}x"));
            r2.extras = Some(Extras { amount: Some(a.clone()) });
            prop_assert_ne!(canonical_bytes(&r1, Decision::Approve, None), canonical_bytes(&r2, Decision::Approve, None));
        }

        /// Whatever the order of fetches and answers, the state list starts with REQUEST_SENT,
        /// holds at most one final state, and that one is last.
        #[test]
        fn at_most_one_final_state(steps in proptest::collection::vec(0u8..3, 0..10)) {
            let k = key();
            let mut r = request(&k, None);
            for step in steps {
                match step {
                    0 => if let Some(next) = r.fetched(T0) { r = next },
                    1 => if let Ok(AnswerOutcome::New(a)) = r.answer("d1", &signed(&k, &r, Decision::Approve, None), T0) { r = a.request },
                    _ => if let Ok(AnswerOutcome::New(a)) = r.answer("d1", &signed(&key(), &r, Decision::Decline, None), T0) { r = a.request },
                }
            }
            prop_assert_eq!(r.state[0].value, OobState::RequestSent);
            let finals = r.state.iter().filter(|s| s.value.is_final()).count();
            prop_assert!(finals <= 1);
            if finals == 1 { prop_assert!(r.is_final()); }
        }
    }

    fn phone(id: &str, token_ends_at: Option<EpochMillis>) -> DeviceRecord {
        DeviceRecord {
            app_id: AppId::parse("appId", "demo").unwrap(),
            named_user: "alice".into(),
            device_id: id.into(),
            friendly_name: id.into(),
            model_number: "m".into(),
            signing_public_key: String::new(),
            key_agreement_public_key: String::new(),
            registered_at: T0,
            token_id: format!("t-{id}"),
            token_ends_at,
            push: None,
            superseded_token_id: None,
            token_issued_at: None,
        }
    }

    fn chosen(
        devices: &[DeviceRecord],
        device_id: Option<&str>,
        machine_id: Option<&str>,
    ) -> Result<String, OobError> {
        choose_device(devices.to_vec(), device_id, machine_id, T0).map(|d| d.device_id)
    }

    #[test]
    fn a_start_goes_to_the_newest_device_that_can_answer() {
        let (live, ended) = (Some(T0.plus_secs(60)), Some(T0));
        let devices = [phone("old", live), phone("legacy", None), phone("new", ended)];
        assert_eq!(chosen(&devices, None, None).unwrap(), "legacy", "a record without an end counts as live");
        assert_eq!(chosen(&devices[..1], None, None).unwrap(), "old");
        assert_eq!(chosen(&devices, None, Some("old")).unwrap(), "old");
        assert_eq!(chosen(&devices, None, Some("new")).unwrap(), "legacy", "a machineId is a preference");
        assert_eq!(chosen(&devices, Some("old"), Some("legacy")).unwrap(), "old");
        assert!(matches!(chosen(&devices, Some("new"), None), Err(OobError::DeviceCannotAnswer)));
        assert!(matches!(chosen(&devices, Some("gone"), None), Err(OobError::UnknownDevice)));
        assert!(matches!(chosen(&devices[2..], None, None), Err(OobError::NoDevice)));
        assert!(matches!(chosen(&[], None, None), Err(OobError::NoDevice)));
    }
}
