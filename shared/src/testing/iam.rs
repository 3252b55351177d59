//! Which AWS actions each function's requests need, against what its role allows. LocalStack
//! enforces no IAM, so a call a function's role does not allow passes every emulated test and
//! fails only when deployed. Here every call a request makes through [`TestClient`] is noted
//! with the IAM action it is authorized by (as the AWS adapters send it: a transaction's items
//! each by their own, a condition check by `ConditionCheckItem`) and the function whose path the
//! request named, and [`Needed::refused`] lists what the endpoint table does not grant.
//!
//! Calls made outside a request (a test's own setup, a use case a test calls directly, a
//! sandbox thread signing) are not noted, unless they run [`as_function`] (the queue consumer).
//!
//! [`TestClient`]: super::http::TestClient

use crate::adapters::aws;
use crate::http::{Endpoint, ENDPOINTS};
use crate::ports::iam::{dynamodb, kms, sns, sqs};
use crate::ports::keys::{Checked, KeyCall, KeyCheck};
use crate::ports::push::{EndpointRequest, Platform, Push, PushError, WakeUp};
use crate::ports::queue::ReceivedMessage;
use crate::ports::*;
use async_trait::async_trait;
use axum::http::Method;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

tokio::task_local! {
    /// Who makes the calls being handled.
    static CALLER: Caller;
}

/// A request to a path (and whether it is a GET), whose function is looked up only when one of
/// its calls is noted (so a benchmark, whose backend notes nothing, does not pay for the
/// lookup), or a function named.
enum Caller {
    Request { path: String, get: bool },
    Function(&'static str),
}

impl Caller {
    fn function(&self) -> Option<&'static str> {
        match self {
            Caller::Request { path, .. } => function_of(path),
            Caller::Function(function) => Some(function),
        }
    }
}

/// Runs `request`, a `method` request to `path`, as a request to the function that serves
/// `path` (none: not noted).
pub async fn within<F: std::future::Future>(method: &Method, path: String, request: F) -> F::Output {
    CALLER.scope(Caller::Request { path, get: method == Method::GET }, request).await
}

/// Runs `calls` as calls of `function`, one no route leads to (the queue consumer).
pub async fn as_function<F: std::future::Future>(function: &'static str, calls: F) -> F::Output {
    CALLER.scope(Caller::Function(function), calls).await
}

/// The function API Gateway routes `path` to ([`crate::http::routes::route_of`]).
pub fn function_of(path: &str) -> Option<&'static str> {
    crate::http::routes::route_of(path).map(|route| route.function)
}

/// A query of the table's indexes: an action on a resource of its own.
const INDEX_QUERY: &str = "dynamodb:Query on an index";
/// A write of the table, but a budget's counter, made by a GET: allowed only where the endpoint
/// table says its GET writes (the OpenAPI document lists 409 for no other GET).
const GET_WRITE: &str = "a write by a GET (not listed in GETS_THAT_WRITE)";

/// The (function, action) pairs noted so far.
#[derive(Default)]
pub struct Needed(Mutex<BTreeSet<(&'static str, &'static str)>>);

impl Needed {
    fn note(&self, action: Option<&'static str>) {
        let Some(action) = action else { return };
        let Some(function) = CALLER.try_with(Caller::function).ok().flatten() else { return };
        self.0.lock().expect("never poisoned").insert((function, action));
    }

    /// Notes a write of the table (but a counter's) as [`GET_WRITE`] when a GET makes it.
    fn note_write(&self) {
        if CALLER.try_with(|caller| matches!(caller, Caller::Request { get: true, .. })).unwrap_or(false) {
            self.note(Some(GET_WRITE));
        }
    }

    /// What was noted, since the last call.
    fn take(&self) -> BTreeSet<(&'static str, &'static str)> {
        std::mem::take(&mut self.0.lock().expect("never poisoned"))
    }

    /// The actions noted for `function` since the last take of them; the others stay.
    pub fn take_of(&self, function: &str) -> BTreeSet<&'static str> {
        let mut noted = self.0.lock().expect("never poisoned");
        let (of, others) = std::mem::take(&mut *noted).into_iter().partition(|(f, _)| *f == function);
        *noted = others;
        of.into_iter().map(|(_, action): (&str, _)| action).collect()
    }

    /// Each noted call its function's role does not allow, as `function: action`.
    pub fn refused(&self) -> Vec<String> {
        self.take()
            .into_iter()
            .filter(|(function, action)| {
                let endpoint =
                    ENDPOINTS.iter().find(|e| e.name == *function).expect("a function of the table");
                !allows(endpoint, action)
            })
            .map(|(function, action)| format!("{function}: {action}"))
            .collect()
    }
}

fn allows(endpoint: &Endpoint, action: &str) -> bool {
    let grants = &endpoint.grants;
    match action {
        INDEX_QUERY => grants.indexes && grants.table.contains(&dynamodb::QUERY),
        GET_WRITE => endpoint.get_writes(),
        sqs::SEND_MESSAGE => grants.queue,
        kms if kms.starts_with("kms:") => grants.envelope.contains(&kms),
        sns if sns.starts_with("sns:") => grants.push.contains(&sns),
        table => grants.table.contains(&table),
    }
}

/// `backend` with every port noting its calls in `needed`.
pub fn noting(backend: &Backend, needed: &Arc<Needed>) -> Backend {
    Backend {
        store: Arc::new(Noting { inner: backend.store.clone(), needed: needed.clone() }),
        keys: Arc::new(Checked::new(backend.keys.clone(), NotingKeys(needed.clone()))),
        queue: Arc::new(Noting { inner: backend.queue.clone(), needed: needed.clone() }),
        push: Arc::new(Noting { inner: backend.push.clone(), needed: needed.clone() }),
        clock: backend.clock.clone(),
    }
}

/// A port that notes each call's IAM action, then passes it on.
struct Noting<T: ?Sized> {
    inner: Arc<T>,
    needed: Arc<Needed>,
}

#[async_trait]
impl ItemStore for Noting<dyn ItemStore> {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    async fn get(&self, key: &ItemKey) -> Result<Option<Item>, StoreError> {
        self.needed.note(Some(dynamodb::GET_ITEM));
        self.inner.get(key).await
    }
    async fn put(&self, item: Item, condition: Condition) -> Result<Item, StoreError> {
        self.needed.note(aws::iam_action(&WriteOp::Put { item: item.clone(), condition }));
        self.needed.note_write();
        self.inner.put(item, condition).await
    }
    async fn delete(&self, key: &ItemKey, condition: Condition) -> Result<(), StoreError> {
        self.needed.note(aws::iam_action(&WriteOp::Delete { key: key.clone(), condition }));
        self.needed.note_write();
        self.inner.delete(key, condition).await
    }
    async fn transact(&self, ops: Vec<WriteOp>) -> Result<(), StoreError> {
        ops.iter().for_each(|op| self.needed.note(aws::iam_action(op)));
        if ops.iter().any(|op| !matches!(op, WriteOp::Increment(_))) {
            self.needed.note_write();
        }
        self.inner.transact(ops).await
    }
    async fn query(&self, query: Query) -> Result<Page, StoreError> {
        self.needed.note(Some(if query.index.is_some() { INDEX_QUERY } else { dynamodb::QUERY }));
        self.inner.query(query).await
    }
    async fn increment(&self, increment: Increment) -> Result<i64, StoreError> {
        self.needed.note(aws::iam_action(&WriteOp::Increment(increment.clone())));
        self.inner.increment(increment).await
    }
    async fn put_each(&self, puts: Vec<(Item, Condition)>) -> Vec<Result<Item, StoreError>> {
        for (item, condition) in &puts {
            self.needed.note(aws::iam_action(&WriteOp::Put { item: item.clone(), condition: *condition }));
        }
        if !puts.is_empty() {
            self.needed.note_write();
        }
        self.inner.put_each(puts).await
    }
}

/// The KMS action each key call needs, noted before it is made.
struct NotingKeys(Arc<Needed>);

#[async_trait]
impl KeyCheck for NotingKeys {
    async fn check(&self, call: KeyCall, _: &EncryptionContext) -> Result<(), KeyError> {
        let action = match call {
            KeyCall::GenerateDataKey => kms::GENERATE_DATA_KEY,
            KeyCall::Decrypt => kms::DECRYPT,
        };
        self.0.note(Some(action));
        Ok(())
    }
}

#[async_trait]
impl Queue for Noting<dyn Queue> {
    async fn send(&self, body: &str, delay: Duration) -> Result<String, QueueError> {
        self.needed.note(Some(sqs::SEND_MESSAGE));
        self.inner.send(body, delay).await
    }
    async fn send_batch(&self, messages: &[(String, Duration)]) -> Result<Vec<String>, QueueError> {
        self.needed.note(Some(sqs::SEND_MESSAGE));
        self.inner.send_batch(messages).await
    }
    async fn receive(&self, max: usize, visibility: Duration) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.needed.note(Some(sqs::RECEIVE_MESSAGE));
        self.inner.receive(max, visibility).await
    }
    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        self.needed.note(Some(sqs::DELETE_MESSAGE));
        self.inner.ack(receipt).await
    }
    async fn dead_letter(&self, body: &str) -> Result<(), QueueError> {
        self.needed.note(Some("sqs:SendMessage to the dead-letter queue"));
        self.inner.dead_letter(body).await
    }
    async fn dead_letters(&self, max: usize) -> Result<Vec<ReceivedMessage>, QueueError> {
        self.needed.note(Some("sqs:ReceiveMessage from the dead-letter queue"));
        self.inner.dead_letters(max).await
    }
}

#[async_trait]
impl Push for Noting<dyn Push> {
    async fn register(&self, request: EndpointRequest<'_>) -> Result<String, PushError> {
        // SNS sets a known endpoint's token; a new one (or one deleted since) is created and read,
        // and set when SNS held an endpoint for the token already.
        self.needed.note(Some(sns::SET_ENDPOINT_ATTRIBUTES));
        self.needed.note(Some(sns::CREATE_PLATFORM_ENDPOINT));
        self.needed.note(Some(sns::GET_ENDPOINT_ATTRIBUTES));
        self.inner.register(request).await
    }
    async fn send(&self, endpoint: &str, platform: Platform, wake: &WakeUp) -> Result<(), PushError> {
        self.needed.note(Some(sns::PUBLISH));
        self.inner.send(endpoint, platform, wake).await
    }
    async fn remove(&self, endpoint: &str) -> Result<(), PushError> {
        self.needed.note(Some(sns::DELETE_ENDPOINT));
        self.inner.remove(endpoint).await
    }
}

#[cfg(test)]
mod tests {
    use super::{function_of, noting, Needed};
    use crate::ports::iam::dynamodb::GET_ITEM;
    use crate::ports::{Clock, SystemClock};
    use std::sync::Arc;

    /// A request's calls are noted as those of the function its path goes to; calls made
    /// outside a request (a test's own setup) are not. Without this, a check that nothing
    /// noted is refused would pass with nothing noted at all.
    #[tokio::test]
    async fn a_requests_calls_are_noted_as_its_functions() {
        let dir = tempfile::tempdir().unwrap();
        let needed = Arc::new(Needed::default());
        let backend = noting(&crate::backend::embedded(dir.path()).unwrap(), &needed);
        let admin =
            crate::testing::fixtures::admin_token(backend.store.as_ref(), SystemClock.now_millis()).await;
        assert!(needed.take().is_empty(), "the setup's calls are nobody's");

        let state = crate::http::AppState::new(backend, crate::http::HttpConfig::default());
        let client = crate::testing::http::TestClient::new(crate::http::app(state));
        assert_eq!(client.send("GET", "/cc/api/apps", Some(&admin), None).await.status, 200);
        let noted = needed.take_of("cc-apps");
        assert!(noted.contains(GET_ITEM), "the token's read, as cc-apps': {noted:?}");
        assert!(needed.take().is_empty(), "and no other function's");
    }

    #[test]
    fn a_path_is_its_functions_as_the_gateway_routes_it() {
        assert_eq!(function_of("/cc/api/apps/a1/devices/d1"), Some("cc-app-device"));
        assert_eq!(function_of("/cc/api/apps/a1/devices/d1/token"), Some("cc-app-device-token"));
        assert_eq!(function_of("/code-customization/env"), Some("code-customization-env"));
        assert_eq!(function_of("/code-customization/12"), Some("code-customization"));
        assert_eq!(function_of("/console/apps/a1?notice=x"), Some("console"));
        assert_eq!(function_of("/console"), Some("console"));
        assert_eq!(function_of("/nowhere"), None);
    }
}
