//! One error for every use case: the area's own, or a port's that no area wraps, or the tenant's
//! rate limit. Each front door maps it once (rp-http to problem+json).

use rp_domain::apps::{ControlError, RateLimit};
use rp_domain::boundary::Failure;
use rp_domain::boundary::MaybeConflict;
use rp_domain::certificates::CertError;
use rp_domain::code::CodeError;
use rp_domain::content::ContentError;
use rp_domain::devices::RegistrationError;
use rp_domain::enrollment::EnrollError;
use rp_domain::events::EventError;
use rp_domain::offline::OfflineError;
use rp_domain::oob::OobError;
use rp_domain::pairing::PairingError;
use rp_ports::PushError;
use rp_repo::ratelimit::Decision;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Control(#[from] ControlError),
    #[error(transparent)]
    Enroll(#[from] EnrollError),
    #[error(transparent)]
    Pairing(#[from] PairingError),
    #[error(transparent)]
    Offline(#[from] OfflineError),
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error(transparent)]
    Oob(#[from] OobError),
    #[error(transparent)]
    Registration(#[from] RegistrationError),
    #[error(transparent)]
    Code(#[from] CodeError),
    #[error(transparent)]
    Content(#[from] ContentError),
    #[error(transparent)]
    Event(#[from] EventError),
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] Failure),
    #[error(transparent)]
    Push(#[from] PushError),
    /// The tenant's budget `rule` is used up (`decision`, counted at `now`, epoch seconds).
    #[error("the tenant's limit of {} requests per {} s is used up", rule.limit, rule.window_secs)]
    RateLimited { rule: RateLimit, decision: Decision, now: i64 },
}

rp_domain::shares_failures!(@from AppError);

impl MaybeConflict for AppError {
    fn is_conflict(&self) -> bool {
        match self {
            AppError::Control(e) => e.is_conflict(),
            AppError::Enroll(e) => e.is_conflict(),
            AppError::Pairing(e) => e.is_conflict(),
            AppError::Cert(e) => e.is_conflict(),
            AppError::Oob(e) => e.is_conflict(),
            AppError::Registration(e) => e.is_conflict(),
            AppError::Code(e) => e.is_conflict(),
            AppError::Content(e) => e.is_conflict(),
            AppError::Failed(e) => e.is_conflict(),
            AppError::Offline(_) | AppError::Event(_) | AppError::Push(_) | AppError::RateLimited { .. } => {
                false
            }
        }
    }
}
