//! Code customizations (DECISIONS §8): a tenant's JavaScript, bound to a trigger, run in the
//! sandbox (the `rp-sandbox` crate) with helpers and the tenant's environment variables. This module
//! holds the records, the request parsing and the pure decisions: what a run's outcome means for
//! the flow that ran it.

use super::time::EpochMillis;
use super::validate::{self, FieldError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Largest `source`, in bytes.
pub const MAX_SOURCE_BYTES: usize = 100 * 1024;
/// `timeoutMs` when none is given, and its ceiling.
pub const DEFAULT_TIMEOUT_MS: u32 = 5_000;
pub const MAX_TIMEOUT_MS: u32 = 20_000;
/// Longest `displayName`.
pub const MAX_DISPLAY_NAME: usize = 255;
/// Environment variables: most per tenant, longest name and value.
pub const MAX_ENV_VARS: usize = 50;
pub const MAX_ENV_NAME: usize = 64;
pub const MAX_ENV_VALUE: usize = 4 * 1024;
/// Longest reason of `api.deny` and text of `api.setTransactionText`.
pub const MAX_HOOK_TEXT: usize = 1_000;

/// Where a customization runs. Only `oob.start` exists so far; the list is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trigger {
    /// Every OOB start of the tenant, before anything is stored or sent to the phone.
    #[serde(rename = "oob.start")]
    OobStart,
}

impl Trigger {
    pub const ALL: [Trigger; 1] = [Trigger::OobStart];

    pub fn name(self) -> &'static str {
        match self {
            Trigger::OobStart => "oob.start",
        }
    }

    fn parse(text: &str) -> Result<Self, FieldError> {
        Self::ALL.into_iter().find(|t| t.name() == text).ok_or_else(|| {
            let known: Vec<_> = Self::ALL.iter().map(|t| t.name()).collect();
            FieldError::new("trigger", format!("must be one of {}", known.join(", ")))
        })
    }
}

/// A code customization as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeRecord {
    pub id: i64,
    pub display_name: String,
    pub trigger: Trigger,
    pub source: String,
    pub timeout_ms: u32,
    pub enabled: bool,
    pub created_at: EpochMillis,
    pub updated_at: EpochMillis,
    /// Set from the store's item version when read; not stored.
    #[serde(skip)]
    pub version: u64,
}

/// A validated create body.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCode {
    pub display_name: String,
    pub trigger: Trigger,
    pub source: String,
    pub timeout_ms: u32,
    pub enabled: bool,
}

/// A validated update body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CodePatch {
    pub display_name: Option<String>,
    pub trigger: Option<Trigger>,
    pub source: Option<String>,
    pub timeout_ms: Option<u32>,
    pub enabled: Option<bool>,
}

fn display_name(name: &str) -> Result<String, FieldError> {
    validate::text("displayName", name, 1, MAX_DISPLAY_NAME)?;
    Ok(name.to_owned())
}

fn source(text: &str) -> Result<String, FieldError> {
    if text.chars().all(validate::is_js_whitespace) {
        return Err(FieldError::new("source", "must not be empty"));
    }
    if text.len() > MAX_SOURCE_BYTES {
        return Err(FieldError::new("source", format!("must be at most {MAX_SOURCE_BYTES} bytes")));
    }
    Ok(text.to_owned())
}

fn timeout_ms(ms: i64) -> Result<u32, FieldError> {
    validate::range("timeoutMs", ms, 1, i64::from(MAX_TIMEOUT_MS))?;
    Ok(ms as u32)
}

/// A create or update body's fields as given, unchecked. Each is an option so that a missing
/// one is refused naming it (a create) or left as it was (an update).
#[derive(Debug, Clone, Default)]
pub struct CodeFields {
    pub display_name: Option<String>,
    pub trigger: Option<String>,
    pub source: Option<String>,
    pub timeout_ms: Option<i64>,
    pub enabled: Option<bool>,
}

impl NewCode {
    /// A create body's fields, checked.
    pub fn parse(fields: CodeFields) -> Result<Self, FieldError> {
        let CodeFields { display_name, trigger, source, timeout_ms, enabled } = fields;
        let required =
            |field: &str, value: Option<String>| value.ok_or_else(|| FieldError::new(field, "is required"));
        Ok(NewCode {
            display_name: self::display_name(&required("displayName", display_name)?)?,
            trigger: Trigger::parse(&required("trigger", trigger)?)?,
            source: self::source(&required("source", source)?)?,
            timeout_ms: timeout_ms.map(self::timeout_ms).transpose()?.unwrap_or(DEFAULT_TIMEOUT_MS),
            enabled: enabled.unwrap_or(false),
        })
    }
}

impl CodePatch {
    /// An update body's fields, checked: at least one is given; the others stay.
    pub fn parse(fields: CodeFields) -> Result<Self, FieldError> {
        let CodeFields { display_name, trigger, source, timeout_ms, enabled } = fields;
        let patch = CodePatch {
            display_name: display_name.as_deref().map(self::display_name).transpose()?,
            trigger: trigger.as_deref().map(Trigger::parse).transpose()?,
            source: source.as_deref().map(self::source).transpose()?,
            timeout_ms: timeout_ms.map(self::timeout_ms).transpose()?,
            enabled,
        };
        if patch == CodePatch::default() {
            return Err(FieldError::new(
                "body",
                "an update must give at least one of displayName, trigger, source, timeoutMs, enabled",
            ));
        }
        Ok(patch)
    }
}

impl NewCode {
    /// The customization as first stored under `id`: version 1, created and updated `now`.
    pub fn record(&self, id: i64, now: EpochMillis) -> CodeRecord {
        CodeRecord {
            id,
            display_name: self.display_name.clone(),
            trigger: self.trigger,
            source: self.source.clone(),
            timeout_ms: self.timeout_ms,
            enabled: self.enabled,
            created_at: now,
            updated_at: now,
            version: 1,
        }
    }
}

impl CodeRecord {
    /// The trigger this customization runs on, if it is enabled.
    pub fn hook(&self) -> Option<Trigger> {
        self.enabled.then_some(self.trigger)
    }

    /// The customization after `patch`.
    pub fn patched(&self, patch: &CodePatch) -> CodeRecord {
        CodeRecord {
            display_name: patch.display_name.clone().unwrap_or_else(|| self.display_name.clone()),
            trigger: patch.trigger.unwrap_or(self.trigger),
            source: patch.source.clone().unwrap_or_else(|| self.source.clone()),
            timeout_ms: patch.timeout_ms.unwrap_or(self.timeout_ms),
            enabled: patch.enabled.unwrap_or(self.enabled),
            ..self.clone()
        }
    }

    /// The current customization with an earlier version's fields, as a new version.
    pub fn restored_from(&self, earlier: &CodeRecord) -> CodeRecord {
        CodeRecord { id: self.id, created_at: self.created_at, version: self.version, ..earlier.clone() }
    }
}

/// An environment variable's name: a letter or `_`, then letters, digits or `_`; at most 64.
pub fn env_name(name: &str) -> Result<&str, FieldError> {
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') || name.len() > MAX_ENV_NAME {
        return Err(FieldError::new(
            "name",
            format!("must be a letter or _ followed by letters, digits or _, at most {MAX_ENV_NAME}"),
        ));
    }
    Ok(name)
}

/// An environment variable's value: at most 4096 bytes of UTF-8.
pub fn env_value(value: String) -> Result<String, FieldError> {
    if value.len() > MAX_ENV_VALUE {
        return Err(FieldError::new("value", format!("must be at most {MAX_ENV_VALUE} bytes")));
    }
    Ok(value)
}

/// A variable as listed: never its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvEntry {
    pub name: String,
    pub updated_at: EpochMillis,
}

/// A tenant's environment variables: the names (with update times) and the values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnvVars {
    pub entries: Vec<EnvEntry>,
    pub values: std::collections::BTreeMap<String, String>,
}

/// All values of a tenant together, in bytes.
pub const MAX_ENV_TOTAL: usize = 64 * 1024;

impl EnvVars {
    /// The variables with `name` = `value`, within the count and size caps.
    pub fn set(mut self, name: &str, value: String, now: EpochMillis) -> Result<Self, CodeError> {
        self.entries.retain(|e| e.name != name);
        self.entries.push(EnvEntry { name: name.to_owned(), updated_at: now });
        self.entries.sort_by(|a, b| a.name.cmp(&b.name));
        self.values.insert(name.to_owned(), value);
        if self.entries.len() > MAX_ENV_VARS {
            return Err(CodeError::TooManyEnvVars);
        }
        if self.values.values().map(String::len).sum::<usize>() > MAX_ENV_TOTAL {
            return Err(FieldError::new(
                "value",
                format!("the tenant's values would pass {MAX_ENV_TOTAL} bytes in all"),
            )
            .into());
        }
        Ok(self)
    }

    /// The variables without `name`.
    pub fn remove(mut self, name: &str) -> Result<Self, CodeError> {
        self.values.remove(name).ok_or_else(|| CodeError::EnvNotFound(name.to_owned()))?;
        self.entries.retain(|e| e.name != name);
        Ok(self)
    }
}

/// What one run produced (the answer of `POST /code-customization/{id}/test`).
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookActions {
    /// `api.deny(reason)`.
    pub denied: Option<String>,
    /// `api.setTransactionText(text)`.
    pub transaction_text: Option<String>,
}

/// What an OOB start does after its customizations ran.
#[derive(Debug, Clone, PartialEq)]
pub enum HookDecision {
    /// Go on, with the transaction text rewritten if a customization asked.
    Allow { transaction_text: Option<String> },
    /// A customization denied the start: 403 naming the reason.
    Deny { id: i64, reason: String },
    /// A customization failed or timed out: the start fails closed.
    Failed { id: i64, error: String },
}

/// Folds the runs of a trigger's customizations (in id order) into one decision: the first
/// failure or denial ends it; a later text replaces an earlier one.
pub fn decide(runs: &[(i64, RunReport)]) -> HookDecision {
    let mut text = None;
    for (id, run) in runs {
        if let Some(error) = &run.error {
            return HookDecision::Failed { id: *id, error: error.clone() };
        }
        if let Some(reason) = &run.actions.denied {
            return HookDecision::Deny { id: *id, reason: reason.clone() };
        }
        if let Some(t) = &run.actions.transaction_text {
            text = Some(t.clone());
        }
    }
    HookDecision::Allow { transaction_text: text }
}

/// The code-customization area's errors; `http::errors` maps each to its problem+json answer.
#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    #[error("id: no code customization {0}")]
    NotFound(i64),
    #[error("version: code customization {id} has no earlier version {version}")]
    VersionNotFound { id: i64, version: u64 },
    #[error("name: no environment variable '{0}'")]
    EnvNotFound(String),
    #[error("the tenant has {MAX_ENV_VARS} environment variables, the most it may have")]
    TooManyEnvVars,
    #[error("source: {0}")]
    BadSource(String),
    #[error("Idempotency-Key: the key was sent with another request within the last day")]
    KeyReused,
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(CodeError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_are_identifiers() {
        assert!(env_name("RISK_ISSUER").is_ok() && env_name("_x1").is_ok());
        for bad in ["", "1A", "A-B", "A B", "Ä"] {
            assert!(env_name(bad).is_err(), "{bad}");
        }
        assert!(env_name(&"A".repeat(64)).is_ok());
        assert_eq!(env_name(&"A".repeat(65)).unwrap_err().field, "name");
    }

    fn fields(source: &str) -> CodeFields {
        CodeFields {
            display_name: Some("risk check".into()),
            trigger: Some("oob.start".into()),
            source: Some(source.into()),
            ..CodeFields::default()
        }
    }

    #[test]
    fn a_create_names_the_first_field_it_refuses_and_defaults_the_rest() {
        let created = NewCode::parse(fields("function handler() {}")).unwrap();
        assert_eq!(
            (created.trigger, created.timeout_ms, created.enabled),
            (Trigger::OobStart, DEFAULT_TIMEOUT_MS, false)
        );
        assert_eq!(created.trigger.name(), "oob.start");
        let refused = |f: CodeFields| NewCode::parse(f).unwrap_err().field;
        assert_eq!(refused(CodeFields { display_name: None, ..fields("f") }), "displayName");
        assert_eq!(refused(CodeFields { display_name: Some("x".repeat(256)), ..fields("f") }), "displayName");
        assert_eq!(refused(CodeFields { trigger: Some("oob.finish".into()), ..fields("f") }), "trigger");
        assert_eq!(refused(fields(" \n\t")), "source");
        assert!(NewCode::parse(fields(&"x".repeat(MAX_SOURCE_BYTES))).is_ok());
        assert_eq!(refused(fields(&"x".repeat(MAX_SOURCE_BYTES + 1))), "source");
        for (ms, ok) in [(0, false), (1, true), (20_000, true), (20_001, false)] {
            let parsed = NewCode::parse(CodeFields { timeout_ms: Some(ms), ..fields("f") });
            assert_eq!(
                parsed.map(|c| c.timeout_ms).map_err(|e| e.field),
                if ok { Ok(ms as u32) } else { Err("timeoutMs".into()) }
            );
        }
    }

    #[test]
    fn an_update_changes_what_it_gives_and_a_restore_keeps_the_identity() {
        assert_eq!(CodePatch::parse(CodeFields::default()).unwrap_err().field, "body");
        assert_eq!(
            CodePatch::parse(CodeFields { source: Some(String::new()), ..CodeFields::default() })
                .unwrap_err()
                .field,
            "source"
        );
        let first = NewCode::parse(fields("function handler() {}")).unwrap().record(7, EpochMillis(1));
        assert_eq!(first.hook(), None, "disabled");
        let patch = CodePatch::parse(CodeFields {
            display_name: Some("renamed".into()),
            timeout_ms: Some(50),
            enabled: Some(true),
            ..fields("function handler() { return 1; }")
        })
        .unwrap();
        let second = CodeRecord { version: 2, ..first.patched(&patch) };
        assert_eq!(
            (second.display_name.as_str(), second.source.as_str()),
            ("renamed", "function handler() { return 1; }")
        );
        assert_eq!((second.timeout_ms, second.hook()), (50, Some(Trigger::OobStart)));
        let only_disable =
            CodePatch::parse(CodeFields { enabled: Some(false), ..CodeFields::default() }).unwrap();
        assert_eq!(second.patched(&only_disable), CodeRecord { enabled: false, ..second.clone() });
        let earlier = CodeRecord { id: 99, created_at: EpochMillis(0), version: 1, ..first.clone() };
        let restored = second.restored_from(&earlier);
        assert_eq!(
            (restored.id, restored.created_at, restored.version),
            (7, EpochMillis(1), 2),
            "the current identity"
        );
        assert_eq!(restored, CodeRecord { id: 7, created_at: EpochMillis(1), version: 2, ..first });
    }

    #[test]
    fn a_tenants_variables_stay_within_their_count_and_size() {
        let now = EpochMillis(5);
        let mut vars = EnvVars::default();
        for i in 0..MAX_ENV_VARS {
            vars = vars.set(&format!("V{i}"), "v".into(), now).unwrap();
        }
        assert!(matches!(vars.clone().set("ONE_MORE", "v".into(), now), Err(CodeError::TooManyEnvVars)));
        let replaced = vars.clone().set("V3", "w".into(), now).unwrap();
        assert_eq!((replaced.entries.len(), replaced.values["V3"].as_str()), (MAX_ENV_VARS, "w"));
        let fewer = replaced.remove("V3").unwrap();
        assert_eq!((fewer.entries.len(), fewer.values.contains_key("V3")), (MAX_ENV_VARS - 1, false));
        assert!(matches!(fewer.remove("V3"), Err(CodeError::EnvNotFound(name)) if name == "V3"));

        assert_eq!(env_value("x".repeat(MAX_ENV_VALUE)).unwrap().len(), MAX_ENV_VALUE);
        assert_eq!(env_value("x".repeat(MAX_ENV_VALUE + 1)).unwrap_err().field, "value");
        let mut full = EnvVars::default();
        for i in 0..MAX_ENV_TOTAL / MAX_ENV_VALUE {
            full = full.set(&format!("K{i}"), "x".repeat(MAX_ENV_VALUE), now).unwrap();
        }
        assert!(full.clone().set("K0", "y".repeat(MAX_ENV_VALUE), now).is_ok(), "the total stays");
        let Err(CodeError::Failed(crate::boundary::Failure::Invalid(over))) =
            full.set("K99", "x".into(), now)
        else {
            panic!("past the total")
        };
        assert_eq!(over.field, "value");
    }

    fn run(error: Option<&str>, denied: Option<&str>, text: Option<&str>) -> RunReport {
        RunReport {
            result: Value::Null,
            logs: Vec::new(),
            duration_ms: 1,
            error: error.map(str::to_owned),
            actions: HookActions {
                denied: denied.map(str::to_owned),
                transaction_text: text.map(str::to_owned),
            },
        }
    }

    #[test]
    fn the_first_failure_or_denial_decides() {
        assert_eq!(decide(&[]), HookDecision::Allow { transaction_text: None });
        let texts = [(1, run(None, None, Some("a"))), (2, run(None, None, Some("b")))];
        assert_eq!(decide(&texts), HookDecision::Allow { transaction_text: Some("b".into()) });
        let denied = [(1, run(None, Some("risk"), None)), (2, run(Some("boom"), None, None))];
        assert_eq!(decide(&denied), HookDecision::Deny { id: 1, reason: "risk".into() });
        let failed = [(1, run(None, None, Some("a"))), (2, run(Some("timed out"), Some("x"), None))];
        assert_eq!(decide(&failed), HookDecision::Failed { id: 2, error: "timed out".into() });
    }
}
