//! AWS adapters: DynamoDB (store), SQS (queue), KMS (keys), SNS (push). Clients are built once per process
//! (per Lambda cold start) from one `SdkConfig`: the store's at the cold start, since every
//! request reads the store; the queue's and the keys' at their first call ([`LazyClient`]), so a
//! function whose requests never queue or sign builds neither.

mod dynamo;
mod kms;
mod lazy;
pub mod provision;
mod sns;
mod sqs;
#[cfg(test)]
mod standin;
mod tls;

pub use dynamo::{iam_action, DynamoStore};
pub use kms::KmsKeys;
pub use lazy::LazyClient;
pub use sns::SnsPush;
pub use sqs::SqsQueue;
pub use tls::{call_timeouts, https_client, sdk_config, TrustRoots, AMAZON_TRUST_ROOTS, CALL_TIMEOUT};

use rp_ports::absent::Absent;
use rp_ports::{KeyService, Push, Queue, Services};
use std::sync::Arc;

/// One client per service.
#[derive(Clone)]
pub struct AwsClients {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub kms: aws_sdk_kms::Client,
    pub sns: aws_sdk_sns::Client,
}

/// Where the AWS resources are: names and ids come from the environment the SAM template sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsConfig {
    pub table_name: String,
    pub queue_url: String,
    pub dead_letter_queue_url: Option<String>,
    pub envelope_key_id: String,
    pub trust_roots: TrustRoots,
}

impl AwsConfig {
    /// Reads `TABLE_NAME`, `QUEUE_URL`, `KMS_ENVELOPE_KEY_ID` (required), `DEAD_LETTER_QUEUE_URL`
    /// and `TLS_TRUST_ROOTS` (optional); every problem is named in one error.
    pub fn from_env() -> Result<Self, AwsConfigError> {
        Self::from_lookup(&|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, AwsConfigError> {
        let mut problems = Vec::new();
        let mut required = |name: &'static str| {
            get(name).filter(|v| !v.is_empty()).unwrap_or_else(|| {
                problems.push(format!("{name} is not set"));
                String::new()
            })
        };
        let config = Self {
            table_name: required("TABLE_NAME"),
            queue_url: required("QUEUE_URL"),
            envelope_key_id: required("KMS_ENVELOPE_KEY_ID"),
            dead_letter_queue_url: get("DEAD_LETTER_QUEUE_URL").filter(|v| !v.is_empty()),
            trust_roots: TrustRoots::from_lookup(get).unwrap_or_else(|problem| {
                problems.push(problem);
                TrustRoots::default()
            }),
        };
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(AwsConfigError(problems))
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("invalid AWS configuration: {}", .0.join("; "))]
pub struct AwsConfigError(pub Vec<String>);

/// The queue and key service a Lambda function builds, as constructors: SQS's and KMS's (built
/// at their first call), or [`Absent`] for a service its endpoint never calls. A function names
/// one of the constants in its `main`, and only the constructors named there are linked, so its
/// binary carries the SDK clients of the services it uses and no other. Each constant has the
/// name of the endpoint's `Services` (`rp_ports::Services`) in `http::ENDPOINTS` (a test holds them together).
#[derive(Clone, Copy)]
pub struct ClientSet {
    queue: fn(&AwsConfig, &aws_config::SdkConfig) -> Arc<dyn Queue>,
    keys: fn(&AwsConfig, &aws_config::SdkConfig) -> Arc<dyn KeyService>,
    push: fn(&aws_config::SdkConfig) -> Arc<dyn Push>,
}

/// What a [`ClientSet`] builds.
pub struct Built {
    pub queue: Arc<dyn Queue>,
    pub keys: Arc<dyn KeyService>,
    pub push: Arc<dyn Push>,
}

impl ClientSet {
    /// The queue, key and push services this set names, over `sdk`: built at their first call.
    pub fn build(&self, config: &AwsConfig, sdk: &aws_config::SdkConfig) -> Built {
        Built { queue: (self.queue)(config, sdk), keys: (self.keys)(config, sdk), push: (self.push)(sdk) }
    }

    /// The clients of `services`: SQS's, KMS's and SNS's where it names them, [`Absent`]
    /// elsewhere. Evaluated in the constants below, so a binary links only the constructors
    /// its constant names.
    pub const fn of(services: Services) -> Self {
        Self {
            queue: if services.queue { sqs_queue } else { absent_queue },
            keys: if services.keys { kms_keys } else { absent_keys },
            push: if services.push { sns_push } else { absent_push },
        }
    }

    pub const STORE: Self = Self::of(Services::STORE);
    pub const KEYS: Self = Self::of(Services::KEYS);
    pub const QUEUE: Self = Self::of(Services::QUEUE);
    pub const PUSH: Self = Self::of(Services::PUSH);
    pub const KEYS_PUSH: Self = Self::of(Services::KEYS_PUSH);
    pub const ALL: Self = Self::of(Services::ALL);
}

fn absent_push(_: &aws_config::SdkConfig) -> Arc<dyn Push> {
    Arc::new(Absent)
}

fn sns_push(sdk: &aws_config::SdkConfig) -> Arc<dyn Push> {
    let sdk = sdk.clone();
    Arc::new(SnsPush::new(LazyClient::new(move || aws_sdk_sns::Client::new(&sdk))))
}

fn absent_queue(_: &AwsConfig, _: &aws_config::SdkConfig) -> Arc<dyn Queue> {
    Arc::new(Absent)
}

fn absent_keys(_: &AwsConfig, _: &aws_config::SdkConfig) -> Arc<dyn KeyService> {
    Arc::new(Absent)
}

fn sqs_queue(config: &AwsConfig, sdk: &aws_config::SdkConfig) -> Arc<dyn Queue> {
    let sdk = sdk.clone();
    sqs_over(config, LazyClient::new(move || aws_sdk_sqs::Client::new(&sdk)))
}

fn kms_keys(config: &AwsConfig, sdk: &aws_config::SdkConfig) -> Arc<dyn KeyService> {
    let sdk = sdk.clone();
    kms_over(config, LazyClient::new(move || aws_sdk_kms::Client::new(&sdk)))
}

/// The queue `config` names, over `client`.
pub fn sqs_over(config: &AwsConfig, client: LazyClient<aws_sdk_sqs::Client>) -> Arc<dyn Queue> {
    Arc::new(SqsQueue::new(client, &config.queue_url, config.dead_letter_queue_url.clone()))
}

/// The keys `config` names, over `client`.
pub fn kms_over(config: &AwsConfig, client: LazyClient<aws_sdk_kms::Client>) -> Arc<dyn KeyService> {
    Arc::new(KmsKeys::new(client, &config.envelope_key_id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_lazy_client_is_built_once_at_its_first_use_and_shared_by_its_clones() {
        let builds = Arc::new(AtomicUsize::new(0));
        let counter = builds.clone();
        let client = LazyClient::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            String::from("client")
        });
        let clone = client.clone();
        assert_eq!(builds.load(Ordering::SeqCst), 0, "nothing is built before the first use");
        assert_eq!(clone.as_str(), "client");
        assert_eq!(client.len(), 6);
        assert_eq!(builds.load(Ordering::SeqCst), 1);
        let ready: LazyClient<u8> = 7.into();
        assert_eq!(*ready, 7);
    }

    /// A service that takes a call and never answers costs the call [`CALL_TIMEOUT`], retries
    /// included, and then it fails as unavailable: well inside the API functions' 10 s time-out,
    /// so the request gets a 503 problem rather than running until Lambda ends it.
    #[tokio::test]
    async fn a_call_to_a_stalled_service_gives_up_inside_the_function_time_out() {
        use rp_ports::{EncryptionContext, ItemKey, KeyError, PushError, QueueError, StoreError};
        let (sdk, connections) = standin::stalling();
        let config = AwsConfig {
            table_name: "t".into(),
            queue_url: "http://127.0.0.1:1/000000000000/q".into(),
            dead_letter_queue_url: None,
            envelope_key_id: "alias/k".into(),
            trust_roots: TrustRoots::Amazon,
        };
        let store =
            DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), "t", Arc::new(rp_ports::SystemClock));
        let Built { queue, keys, push } = ClientSet::ALL.build(&config, &sdk);
        let (key, context) = (ItemKey::new("P", "S"), EncryptionContext::new("app", "purpose"));
        let calls = async {
            tokio::join!(
                rp_ports::ItemStore::get(&store, &key),
                queue.send("{}", std::time::Duration::ZERO),
                keys.generate_data_key(&context),
                push.remove("arn:aws:sns:us-east-1:000000000000:endpoint/GCM/app/1"),
            )
        };
        let function_time_out = std::time::Duration::from_secs(10);
        assert!(CALL_TIMEOUT < function_time_out);
        let (read, sent, sealed, removed) =
            tokio::time::timeout(function_time_out, calls).await.expect("every call gives up in time");
        assert!(matches!(read, Err(StoreError::Unavailable(_))), "{read:?}");
        assert!(matches!(sent, Err(QueueError::Unavailable(_))), "{sent:?}");
        assert!(matches!(&sealed, Err(KeyError::Unavailable(_))), "{:?}", sealed.err());
        assert!(matches!(removed, Err(PushError::Unavailable(_))), "{removed:?}");
        // A stalled attempt is abandoned and the call sent again on a new connection.
        assert!(connections.load(Ordering::SeqCst) >= 8, "{connections:?}");
    }

    #[test]
    fn every_missing_variable_is_reported_at_once() {
        let get = |name: &str| match name {
            "QUEUE_URL" => Some("q".to_owned()),
            "TLS_TRUST_ROOTS" => Some("all".to_owned()),
            _ => None,
        };
        let err = AwsConfig::from_lookup(&get).unwrap_err();
        assert_eq!(
            err.0,
            vec![
                "TABLE_NAME is not set",
                "KMS_ENVELOPE_KEY_ID is not set",
                "TLS_TRUST_ROOTS must be 'amazon' or 'system', not 'all'",
            ]
        );
        let ok = AwsConfig::from_lookup(&|name| (name != "TLS_TRUST_ROOTS").then(|| format!("{name}-value")))
            .unwrap();
        assert_eq!(ok.table_name, "TABLE_NAME-value");
        assert_eq!(ok.trust_roots, TrustRoots::Amazon);
    }
}
