//! The code-customization bodies: create, update, an environment variable's value, and what a
//! test run produced.

use super::mirror_enum;
use rp_domain::code::{self as domain, CodeFields, CodePatch, NewCode, Trigger as DomainTrigger};
use rp_domain::validate::FieldError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mirror_enum! {
    /// Where a customization runs. Only `oob.start` exists so far; the list is open.
    pub enum Trigger for DomainTrigger {
        /// Every OOB start of the tenant, before anything is stored or sent to the phone.
        #[serde(rename = "oob.start")]
        OobStart,
    }
}

/// The body of `POST /code-customization`.
// The fields are read as options so that a missing one is a 400 naming it; the schema says
// what `NewCode` requires. Its bounds are MAX_DISPLAY_NAME, MAX_SOURCE_BYTES and
// MAX_TIMEOUT_MS, which a test holds the document to.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateCode {
    #[serde(default, deserialize_with = "super::present")]
    #[schema(required = true, nullable = false, min_length = 1, max_length = 255)]
    pub display_name: Option<String>,
    #[serde(default, deserialize_with = "super::present")]
    #[schema(required = true, nullable = false, value_type = Trigger)]
    pub trigger: Option<String>,
    /// JavaScript defining `handler(event, api)`: at most 102,400 bytes of UTF-8, which
    /// `maxLength` (a count of characters) can only bound from above.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(required = true, nullable = false, pattern = "\\S", max_length = 102400)]
    pub source: Option<String>,
    /// Milliseconds the run may take (default 5000).
    #[serde(default, deserialize_with = "super::present")]
    #[schema(nullable = false, minimum = 1, maximum = 20000)]
    pub timeout_ms: Option<i64>,
    /// Whether it runs on its trigger (default false).
    #[serde(default, deserialize_with = "super::present")]
    #[schema(nullable = false)]
    pub enabled: Option<bool>,
}

/// The body of `POST /code-customization/{id}`: at least one of the fields; omitted ones stay.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(min_properties = 1)]
pub struct UpdateCode {
    #[serde(default, deserialize_with = "super::present")]
    #[schema(nullable = false, min_length = 1, max_length = 255)]
    pub display_name: Option<String>,
    #[serde(default, deserialize_with = "super::present")]
    #[schema(required = false, nullable = false, value_type = Trigger)]
    pub trigger: Option<String>,
    /// As at creation: at most 102,400 bytes of UTF-8.
    #[serde(default, deserialize_with = "super::present")]
    #[schema(nullable = false, pattern = "\\S", max_length = 102400)]
    pub source: Option<String>,
    #[serde(default, deserialize_with = "super::present")]
    #[schema(nullable = false, minimum = 1, maximum = 20000)]
    pub timeout_ms: Option<i64>,
    #[serde(default, deserialize_with = "super::present")]
    #[schema(nullable = false)]
    pub enabled: Option<bool>,
}
impl TryFrom<CreateCode> for NewCode {
    type Error = FieldError;

    fn try_from(body: CreateCode) -> Result<Self, FieldError> {
        let CreateCode { display_name, trigger, source, timeout_ms, enabled } = body;
        NewCode::parse(CodeFields { display_name, trigger, source, timeout_ms, enabled })
    }
}

impl TryFrom<UpdateCode> for CodePatch {
    type Error = FieldError;

    fn try_from(body: UpdateCode) -> Result<Self, FieldError> {
        let UpdateCode { display_name, trigger, source, timeout_ms, enabled } = body;
        CodePatch::parse(CodeFields { display_name, trigger, source, timeout_ms, enabled })
    }
}

/// The body of `PUT /code-customization/env/{name}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvValue {
    /// At most 4096 bytes of UTF-8.
    #[schema(max_length = 4096)]
    pub value: String,
}

impl EnvValue {
    pub fn checked(self) -> Result<String, FieldError> {
        domain::env_value(self.value)
    }
}

/// What one run produced (the answer of `POST /code-customization/{id}/test`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// The handler's return value as JSON; `null` when it failed.
    pub result: Value,
    /// The captured `console.log` lines, bounded, with env values scrubbed.
    pub logs: Vec<String>,
    pub duration_ms: u64,
    /// Why the run failed (a throw, a time-out, the memory limit), scrubbed; `null` on success.
    pub error: Option<String>,
    /// What the handler asked of the flow through `api`.
    pub actions: HookActions,
}

/// What a handler asked through `api`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookActions {
    /// `api.deny(reason)`.
    pub denied: Option<String>,
    /// `api.setTransactionText(text)`.
    pub transaction_text: Option<String>,
}

impl From<domain::RunReport> for RunReport {
    fn from(run: domain::RunReport) -> Self {
        let actions =
            HookActions { denied: run.actions.denied, transaction_text: run.actions.transaction_text };
        Self { result: run.result, logs: run.logs, duration_ms: run.duration_ms, error: run.error, actions }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_domain::code::{DEFAULT_TIMEOUT_MS, MAX_SOURCE_BYTES};
    use rp_domain::EpochMillis;
    use serde_json::json;

    fn create(body: Value) -> Result<NewCode, FieldError> {
        NewCode::try_from(serde_json::from_value::<CreateCode>(body).unwrap())
    }

    #[test]
    fn a_create_names_the_field_at_fault() {
        let ok =
            create(json!({"displayName": "risk", "trigger": "oob.start", "source": "function handler(){}"}));
        let ok = ok.unwrap();
        assert_eq!((ok.timeout_ms, ok.enabled), (DEFAULT_TIMEOUT_MS, false));
        let field = |body| create(body).unwrap_err().field;
        assert_eq!(field(json!({"trigger": "oob.start", "source": "x"})), "displayName");
        assert_eq!(field(json!({"displayName": "a", "trigger": "login", "source": "x"})), "trigger");
        assert_eq!(field(json!({"displayName": "a", "trigger": "oob.start", "source": " "})), "source");
        // Blank means blank to JavaScript, as the schema's `\S` pattern says: U+FEFF and the
        // line separator are whitespace there, U+0085 (NEL) is not (schemathesis, seed 23).
        for blank in ["", "\u{FEFF}", " \u{2028}\t\u{3000}\r\n"] {
            let body = json!({"displayName": "a", "trigger": "oob.start", "source": blank});
            assert_eq!(field(body), "source", "{blank:?} is blank");
        }
        let nel = create(json!({"displayName": "a", "trigger": "oob.start", "source": "\u{85}"}));
        assert_eq!(nel.unwrap().source, "\u{85}");
        let big = "x".repeat(MAX_SOURCE_BYTES + 1);
        assert_eq!(field(json!({"displayName": "a", "trigger": "oob.start", "source": big})), "source");
        let slow = json!({"displayName": "a", "trigger": "oob.start", "source": "x", "timeoutMs": 20_001});
        assert_eq!(field(slow), "timeoutMs");
    }

    #[test]
    fn an_empty_update_is_refused_and_a_patch_keeps_the_rest() {
        assert_eq!(CodePatch::try_from(UpdateCode::default()).unwrap_err().field, "body");
        let record = create(json!({"displayName": "a", "trigger": "oob.start", "source": "s"}))
            .unwrap()
            .record(1, EpochMillis(5));
        let patch = CodePatch { enabled: Some(true), ..CodePatch::default() };
        let next = record.patched(&patch);
        assert!(next.enabled);
        assert_eq!((next.source.as_str(), next.display_name.as_str()), ("s", "a"));
    }
}
