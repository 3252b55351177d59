//! Who a console request is from: the admin behind the session. The page layout shows it; the
//! extractors in [`super::auth`] resolve it and what it may act for.

use rp_domain::console::ConsoleSession;
use rp_domain::tokens::TokenRecord;

/// The admin a console request is from: a live session and the token it stands for.
#[derive(Debug, Clone)]
pub struct Operator {
    pub session: ConsoleSession,
    pub token: TokenRecord,
}

impl Operator {
    /// A global admin, who sees every app; otherwise the token is scoped to one.
    pub fn is_global(&self) -> bool {
        self.session.app_id.is_none()
    }

    pub fn describe(&self) -> String {
        match &self.session.app_id {
            None => format!("admin token {} (global)", self.token.token_id),
            Some(app) => format!("admin token {} (app {app})", self.token.token_id),
        }
    }

    /// Who an event says did it.
    pub fn source(&self) -> String {
        format!("admin:{}", self.token.token_id)
    }
}
