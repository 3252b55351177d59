//! Code customizations: the tenant's records and environment, the job a run is, and the hooks
//! that decide a flow (each enabled customization of a trigger, run in the sandbox).

use crate::{AppState, HasClock, HasKeys, HasSettings, HasStore};
use rp_domain::apps::AppId;
use rp_domain::code::{self, CodeError, CodeRecord, EnvEntry, HookDecision, Trigger};
use rp_domain::events::CODE_EVENT;
use rp_domain::events::{attributes, EventRecord};
use rp_domain::time::EpochMillis;
use rp_ports::{retry_on_conflict, StoreError};
use rp_repo::code_env::{CodeEnv, SealedEnv};
use rp_repo::events::Events;
use rp_repo::versioned::CodeRecords;
use rp_sandbox::{self as sandbox, Job};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// The tenant's code customizations, keeping the configured number of earlier versions.
pub(crate) fn records<'a>(state: &'a (impl HasSettings + HasStore), tenant: &AppId) -> CodeRecords<'a> {
    crate::customizations::records(state, tenant)
}

/// The tenant's environment variables, sealed under the key service.
pub(crate) fn env<'a>(state: &'a (impl HasKeys + HasStore), tenant: &AppId) -> CodeEnv<'a> {
    CodeEnv::new(state.store(), state.keys(), tenant)
}

/// The names of the tenant's environment variables with their update times: never a value.
pub async fn env_names(
    state: &(impl HasKeys + HasStore),
    tenant: &AppId,
) -> Result<Vec<EnvEntry>, StoreError> {
    env(state, tenant).names().await
}

/// The issuer of the tokens a tenant's customizations mint, and the base of its JWKS URL.
pub fn issuer(state: &impl HasSettings, tenant: &AppId) -> String {
    format!("{}/rp/api/apps/{tenant}", state.settings().public_base_url.trim_end_matches('/'))
}

/// The sandbox job of running `record` on `event` with the tenant's variables `env`.
pub fn job(
    state: &impl HasSettings,
    tenant: &AppId,
    record: &CodeRecord,
    event: Value,
    env: BTreeMap<String, String>,
) -> Job {
    Job {
        tenant: tenant.to_string(),
        source: record.source.clone(),
        event,
        env,
        issuer: issuer(state, tenant),
        timeout: Duration::from_millis(u64::from(record.timeout_ms)),
        memory_bytes: sandbox::DEFAULT_MEMORY_BYTES,
    }
}

/// The ids of the tenant's enabled customizations of `trigger`, in id order: one read, however
/// many disabled ones the tenant keeps. Apart from [`hooks`], which reads what they name, so
/// that a caller can make each read beside its own.
pub async fn hook_ids(
    state: &(impl HasSettings + HasStore),
    tenant: &AppId,
    trigger: Trigger,
) -> Result<Vec<i64>, CodeError> {
    Ok(records(state, tenant).index(trigger.name()).await?)
}

/// The tenant's enabled customizations of a trigger and its variables as stored: sealed until
/// the first [`run_hook`] opens them, once however often the hooks run.
#[derive(Default)]
pub struct Hooks {
    enabled: Vec<CodeRecord>,
    env: Option<SealedEnv>,
    opened: tokio::sync::OnceCell<BTreeMap<String, String>>,
}

/// The customizations `ids` ([`hook_ids`] of `trigger`) and the tenant's variables, read at
/// once; nothing is read when none is enabled.
pub async fn hooks(
    state: &(impl HasKeys + HasSettings + HasStore),
    tenant: &AppId,
    trigger: Trigger,
    ids: Vec<i64>,
) -> Result<Hooks, CodeError> {
    if ids.is_empty() {
        return Ok(Hooks::default());
    }
    let (records, env) = (records(state, tenant), self::env(state, tenant));
    let (enabled, env) = tokio::join!(records.listed_in(trigger.name(), ids), env.read());
    Ok(Hooks { enabled: enabled?, env: env?, opened: Default::default() })
}

/// Runs `hooks` (the tenant's enabled customizations of `trigger`) on `event`, in turn, with
/// the tenant's variables (opened on the first run), and decides. They share one budget, until
/// `deadline`: each runs within its own time-out and what is left of it, so one that the others
/// left no time fails (closed). A denial or a failure is logged as an event.
pub async fn run_hook(
    state: &AppState,
    tenant: &AppId,
    trigger: Trigger,
    hooks: &Hooks,
    event: Value,
    deadline: tokio::time::Instant,
) -> Result<HookDecision, CodeError> {
    if hooks.enabled.is_empty() {
        return Ok(HookDecision::Allow { transaction_text: None });
    }
    let open = || async { Ok::<_, CodeError>(env(state, tenant).open(hooks.env.clone()).await?.values) };
    let vars = hooks.opened.get_or_try_init(open).await?;
    let mut runs = Vec::with_capacity(hooks.enabled.len());
    for record in &hooks.enabled {
        let mut job = job(state, tenant, record, event.clone(), vars.clone());
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        job.timeout = job.timeout.min(left).max(Duration::from_millis(1));
        let report = sandbox::run(crate::signing::TenantSigner::new(state, tenant), job).await;
        let stop = report.error.is_some() || report.actions.denied.is_some();
        runs.push((record.id, report));
        if stop {
            break;
        }
    }
    let decision = code::decide(&runs);
    let outcome = match &decision {
        HookDecision::Allow { .. } => None,
        HookDecision::Deny { id, reason } => Some((*id, "denied", reason.as_str())),
        HookDecision::Failed { id, error } => Some((*id, "failed", error.as_str())),
    };
    if let Some((id, outcome, detail)) = outcome {
        let id = id.to_string();
        let attrs =
            attributes(&[("id", &id), ("trigger", trigger.name()), ("outcome", outcome), ("detail", detail)]);
        let event =
            EventRecord::new(CODE_EVENT, Some(tenant.clone()), "server", state.clock().now_millis(), attrs);
        Events::new(state.store()).record(&event).await?;
    }
    Ok(decision)
}

/// Sets the tenant's variable `name` to `value`; retried on a concurrent change. When it was set.
pub async fn set_env(
    state: &(impl HasClock + HasKeys + HasStore),
    tenant: &AppId,
    name: &str,
    value: String,
) -> Result<EpochMillis, CodeError> {
    let now = state.clock().now_millis();
    let vars = &env(state, tenant);
    let value = &value;
    retry_on_conflict(|| async move {
        let (current, version, fresh) = vars.load_to_change().await?;
        let next = current.set(name, value.clone(), now)?;
        vars.save(&next, version, fresh).await?;
        Ok::<_, CodeError>(())
    })
    .await?;
    tracing::info!(%tenant, %name, "code environment variable set");
    Ok(now)
}

/// Deletes the tenant's variable `name`; retried on a concurrent change.
pub async fn remove_env(
    state: &(impl HasKeys + HasStore),
    tenant: &AppId,
    name: &str,
) -> Result<(), CodeError> {
    let vars = &env(state, tenant);
    retry_on_conflict(|| async move {
        let (current, version, fresh) = vars.load_to_change().await?;
        vars.save(&current.remove(name)?, version, fresh).await?;
        Ok::<_, CodeError>(())
    })
    .await?;
    tracing::info!(%tenant, %name, "code environment variable deleted");
    Ok(())
}

/// A test run of the tenant's customization `id`, enabled or not, on `event` (an object; `{}`
/// when `None`): what the sandbox reports. The customization and the tenant's environment are
/// read (and opened) at once; `go_ahead` (a rate limit's gate, say) is awaited after the reads
/// and before the run, the costly part.
pub async fn test_run(
    state: &AppState,
    tenant: &AppId,
    id: i64,
    event: Option<Value>,
    go_ahead: impl std::future::Future<Output = Result<(), rp_ports::StoreError>>,
) -> Result<code::RunReport, CodeError> {
    let environment = env(state, tenant);
    let record = crate::customizations::get::<CodeRecord>(state, tenant, id);
    let (record, vars) = tokio::join!(record, environment.load());
    let record = record?;
    let event = match event {
        None | Some(Value::Null) => serde_json::json!({}),
        Some(event @ Value::Object(_)) => event,
        Some(_) => return Err(rp_domain::FieldError::new("event", "must be an object").into()),
    };
    let (vars, _) = vars.map_err(CodeError::from)?;
    go_ahead.await?;
    let report = sandbox::run(
        crate::signing::TenantSigner::new(state, tenant),
        job(state, tenant, &record, event, vars.values),
    )
    .await;
    tracing::info!(%tenant, id = record.id, duration_ms = report.duration_ms, failed = report.error.is_some(), "code customization test run");
    Ok(report)
}
