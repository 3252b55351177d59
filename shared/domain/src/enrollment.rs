//! Workstation enrollment (workstation-api.md; DECISIONS §4): the session that ties `enroll` to
//! `complete`, as pure functions. OPEN (enroll; reopened by the same user's enroll under the same
//! id) → COMPLETED (errorCode 0: the enrollment is persisted, WORKSTATION_ENROLL) | FAILED
//! (errorCode > 0: OOB_WORKSTATION_REG with success=false). A repeated complete with the same
//! data is answered again and changes nothing.

use super::apps::AppId;
use super::events::{attributes, EventRecord};
use super::time::EpochMillis;
use super::validate::FieldError;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// How long an enrollment session stays open.
pub const SESSION_TTL_SECS: i64 = 10 * 60;
/// How long a closed session is kept, so a repeated complete is recognised.
pub const CLOSED_SESSION_KEPT_SECS: i64 = 24 * 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionState {
    Open,
    Completed,
    Failed,
}

/// What a complete call reported; a repeat must report the same.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub error_code: i64,
    pub machine_name: String,
    pub machine_id: String,
    pub machine_user_name: String,
    pub machine_version: String,
    pub signing_cert: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrollmentSession {
    pub session_id: String,
    pub app_id: AppId,
    pub named_user: String,
    pub device_id: String,
    pub machine_user_name_ws: String,
    pub created_at: EpochMillis,
    pub expires_at: EpochMillis,
    /// Machine details pinned at enroll time (when the workstation sent them) or by the first
    /// complete call; later calls are cross-checked against them.
    pub machine_id: Option<String>,
    pub machine_version: Option<String>,
    pub state: SessionState,
    pub completion: Option<Completion>,
}

/// A machine's completed enrollment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrollmentRecord {
    pub app_id: AppId,
    pub machine_id: String,
    pub machine_name: String,
    pub machine_version: String,
    pub machine_user_name: String,
    pub named_user: String,
    pub device_id: String,
    pub signing_cert: String,
    pub session_id: String,
    pub enrolled_at: EpochMillis,
    /// The workstation's recovery keys for the enrolled device, sealed under the app's data key
    /// (context: tenant, purpose `recovery-keys`, machine, device); never logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_keys: Option<crate::boundary::Sealed>,
    /// The name the workstation enrolled the user under (`machineUserNameWS`); empty for
    /// enrollments stored before it was kept.
    #[serde(default)]
    pub machine_user_name_ws: String,
    /// The id of the access token of the workstation that enrolled the machine: only it may
    /// enroll the machine again while that token is valid. `None` for enrollments stored before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl EnrollmentRecord {
    /// Whether the workstation whose token is `token_id` may replace this enrollment (and the
    /// recovery keys deposited with it): its own workstation may; another only once the owner's
    /// token is no longer valid (`owner_valid`: an admin revoked it, or it expired), which is how
    /// an admin hands a machine to a new workstation.
    pub fn may_be_replaced_by(&self, token_id: &str, owner_valid: bool) -> Result<(), EnrollError> {
        match &self.owner {
            Some(owner) if owner != token_id && owner_valid => Err(EnrollError::MachineTaken),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    #[error("machineId: the machine is enrolled by another workstation (its access token is still valid)")]
    MachineTaken,
    #[error("machineUserNameWS: no registered user has this name")]
    UnknownUser,
    #[error("machineUserNameWS: the user has no registered device that can answer")]
    NoDevice,
    #[error("sessionId: no open enrollment session has this id (unknown or expired)")]
    SessionNotFound,
    #[error("{field}: does not match the enrollment session's {what}")]
    CrossCheck { field: &'static str, what: &'static str },
    #[error("sessionId: this session belongs to another enrollment")]
    SessionInUse,
    #[error("sessionId: this session was completed with other data")]
    SessionClosed,
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(EnrollError);

/// What a complete call does.
#[derive(Debug, Clone, PartialEq)]
pub enum Completed {
    /// The session closes.
    Closed(Box<Closing>),
    /// The same completion was recorded already.
    Repeated,
}

/// A session's close: on success the enrollment to persist; the event reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Closing {
    pub session: EnrollmentSession,
    pub enrollment: Option<EnrollmentRecord>,
    pub event: EventRecord,
    pub message: &'static str,
}

impl EnrollmentSession {
    /// The session `fresh` under an id that has one already: the same user may reopen an open
    /// session; anything else is [`EnrollError::SessionInUse`].
    pub fn reopen(&self, fresh: EnrollmentSession) -> Result<EnrollmentSession, EnrollError> {
        if self.named_user != fresh.named_user || self.state != SessionState::Open {
            return Err(EnrollError::SessionInUse);
        }
        Ok(fresh)
    }

    /// Completes the session with what the workstation reported. `user` is the registered user
    /// `completion.machine_user_name` stands for (by name or alias), if any.
    pub fn complete(
        &self,
        completion: Completion,
        user: Option<&str>,
        source: &str,
        now: EpochMillis,
    ) -> Result<Completed, EnrollError> {
        if user != Some(self.named_user.as_str()) {
            return Err(EnrollError::CrossCheck { field: "machineUserName", what: "user" });
        }
        if self.machine_id.as_deref().is_some_and(|m| m != completion.machine_id) {
            return Err(EnrollError::CrossCheck { field: "machineId", what: "machine" });
        }
        if self.machine_version.as_deref().is_some_and(|v| v != completion.machine_version) {
            return Err(EnrollError::CrossCheck { field: "machineVersion", what: "machine version" });
        }
        match (&self.state, &self.completion) {
            (SessionState::Open, _) => {}
            (_, Some(done)) if *done == completion => return Ok(Completed::Repeated),
            _ => return Err(EnrollError::SessionClosed),
        }
        let mut session = self.clone();
        session.machine_id = Some(completion.machine_id.clone());
        session.machine_version = Some(completion.machine_version.clone());
        session.completion = Some(completion.clone());
        let app = Some(self.app_id.clone());
        if completion.error_code == 0 {
            session.state = SessionState::Completed;
            let enrollment = EnrollmentRecord {
                app_id: self.app_id.clone(),
                machine_id: completion.machine_id,
                machine_name: completion.machine_name,
                machine_version: completion.machine_version,
                machine_user_name: completion.machine_user_name,
                named_user: self.named_user.clone(),
                device_id: self.device_id.clone(),
                signing_cert: completion.signing_cert,
                session_id: self.session_id.clone(),
                enrolled_at: now,
                recovery_keys: None,
                machine_user_name_ws: self.machine_user_name_ws.clone(),
                owner: None,
            };
            let attrs =
                attributes(&[("machineId", &enrollment.machine_id), ("deviceId", &enrollment.device_id)]);
            let event = EventRecord::new("WORKSTATION_ENROLL", app, source, now, attrs);
            let closing =
                Closing { session, enrollment: Some(enrollment), event, message: "Enrollment completed" };
            Ok(Completed::Closed(Box::new(closing)))
        } else {
            session.state = SessionState::Failed;
            let mut attrs =
                attributes(&[("machineId", &completion.machine_id), ("sessionId", &self.session_id)]);
            attrs.insert("success".into(), json!(false));
            attrs.insert("errorCode".into(), json!(completion.error_code));
            let event = EventRecord::new("OOB_WORKSTATION_REG", app, source, now, attrs);
            let closing =
                Closing { session, enrollment: None, event, message: "Enrollment failure recorded" };
            Ok(Completed::Closed(Box::new(closing)))
        }
    }
}

/// An enroll request, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Enroll {
    pub app_id: AppId,
    /// `None` when the session names the user.
    pub machine_user_name_ws: Option<String>,
    /// `None` on the user-name-and-password path: the server issues one.
    pub session_id: Option<String>,
    pub machine_id: Option<String>,
    pub machine_version: Option<String>,
}

/// The enroll request named no user: no `machineUserNameWS`, and no `sessionId` that names a
/// session of a user.
pub fn unnamed_user() -> FieldError {
    FieldError::new(
        "machineUserNameWS",
        "is required unless sessionId names the user's enrollment session or an OOB authentication they approved",
    )
}

/// Largest recovery-key blob, decoded.
pub const MAX_RECOVERY_KEYS: usize = 8 * 1024;

/// A complete request, checked: the session it names and what it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Complete {
    pub session_id: String,
    pub completion: Completion,
    /// The recovery-key blob as deposited (base64, checked).
    pub recovery_keys: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: EpochMillis = EpochMillis(5_000_000);

    fn session() -> EnrollmentSession {
        EnrollmentSession {
            session_id: "s1".into(),
            app_id: AppId::parse("appId", "demo").unwrap(),
            named_user: "alice".into(),
            device_id: "d1".into(),
            machine_user_name_ws: "CORP\\alice".into(),
            created_at: T0,
            expires_at: T0.plus_secs(SESSION_TTL_SECS),
            machine_id: None,
            machine_version: None,
            state: SessionState::Open,
            completion: None,
        }
    }

    fn completion(code: i64) -> Completion {
        Completion {
            error_code: code,
            machine_name: "ws".into(),
            machine_id: "m1".into(),
            machine_user_name: "alice".into(),
            machine_version: "1.0".into(),
            signing_cert: "cert".into(),
        }
    }

    #[test]
    fn success_persists_the_enrollment_and_a_repeat_changes_nothing() {
        let Completed::Closed(closing) =
            session().complete(completion(0), Some("alice"), "workstation:t", T0).unwrap()
        else {
            panic!("closed")
        };
        let Closing { session, enrollment, event, .. } = *closing;
        assert_eq!(session.state, SessionState::Completed);
        assert_eq!(enrollment.unwrap().device_id, "d1");
        assert_eq!(event.name, "WORKSTATION_ENROLL");
        assert_eq!(session.complete(completion(0), Some("alice"), "w", T0).unwrap(), Completed::Repeated);
        let mut other = completion(0);
        other.machine_name = "other".into();
        assert!(matches!(session.complete(other, Some("alice"), "w", T0), Err(EnrollError::SessionClosed)));
    }

    #[test]
    fn only_its_own_workstation_replaces_an_enrollment_while_the_owners_token_is_valid() {
        let Completed::Closed(closing) = session().complete(completion(0), Some("alice"), "w", T0).unwrap()
        else {
            panic!("closed")
        };
        let enrolled = closing.enrollment.unwrap();
        let owned = EnrollmentRecord { owner: Some("t1".into()), ..enrolled.clone() };
        assert!(owned.may_be_replaced_by("t1", true).is_ok(), "its own workstation, again");
        assert!(matches!(owned.may_be_replaced_by("t2", true), Err(EnrollError::MachineTaken)));
        assert!(owned.may_be_replaced_by("t2", false).is_ok(), "handed over: the owner's token ended");
        assert!(enrolled.owner.is_none());
        assert!(enrolled.may_be_replaced_by("t2", true).is_ok(), "stored before owners were kept");
    }

    #[test]
    fn failure_closes_the_session_with_its_event() {
        let Completed::Closed(closing) = session().complete(completion(7), Some("alice"), "w", T0).unwrap()
        else {
            panic!("closed")
        };
        let Closing { session, enrollment, event, .. } = *closing;
        assert_eq!((session.state, enrollment), (SessionState::Failed, None));
        assert_eq!(
            (event.name.as_str(), &event.attributes["success"]),
            ("OOB_WORKSTATION_REG", &json!(false))
        );
    }

    #[test]
    fn cross_checks_name_the_field() {
        let check =
            |s: &EnrollmentSession, c: Completion, user: Option<&str>| match s.complete(c, user, "w", T0) {
                Err(EnrollError::CrossCheck { field, .. }) => field,
                other => panic!("{other:?}"),
            };
        assert_eq!(check(&session(), completion(0), Some("bob")), "machineUserName");
        assert_eq!(check(&session(), completion(0), None), "machineUserName");
        let pinned = EnrollmentSession { machine_id: Some("m2".into()), ..session() };
        assert_eq!(check(&pinned, completion(0), Some("alice")), "machineId");
        let versioned = EnrollmentSession { machine_version: Some("2.0".into()), ..session() };
        assert_eq!(check(&versioned, completion(0), Some("alice")), "machineVersion");
    }

    #[test]
    fn only_the_same_user_reopens_an_open_session() {
        assert!(session().reopen(session()).is_ok());
        let bob = EnrollmentSession { named_user: "bob".into(), ..session() };
        assert!(matches!(session().reopen(bob), Err(EnrollError::SessionInUse)));
        let closed = EnrollmentSession { state: SessionState::Completed, ..session() };
        assert!(matches!(closed.reopen(session()), Err(EnrollError::SessionInUse)));
    }

    proptest! {
        /// A closed session never changes again, whatever is reported to it.
        #[test]
        fn a_closed_session_stays_closed(first in 0i64..3, second in 0i64..3, name in "[a-z]{1,8}") {
            let Completed::Closed(closing) =
                session().complete(completion(first), Some("alice"), "w", T0).unwrap() else { unreachable!() };
            let closed = closing.session;
            let mut again = completion(second);
            again.machine_name = name;
            match closed.complete(again.clone(), Some("alice"), "w", T0) {
                Ok(Completed::Repeated) => prop_assert_eq!(closed.completion.as_ref(), Some(&again)),
                Err(EnrollError::SessionClosed) => prop_assert_ne!(closed.completion.as_ref(), Some(&again)),
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
