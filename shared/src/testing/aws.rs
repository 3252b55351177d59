//! The emulator harness for the AWS-backed suites (moto, DynamoDB Local, LocalStack).
//!
//! Endpoints come from `AWS_ENDPOINT_URL_<SERVICE>` or `AWS_ENDPOINT_URL`; with none set the
//! AWS-backed cases skip, saying so. An endpoint that is not on the loopback interface is refused:
//! these suites create and delete resources and must never reach a real account. The harness sets
//! the region, dummy credentials and `AWS_EC2_METADATA_DISABLED` itself, whatever the shell has.

use crate::adapters::aws::provision::{
    create_key, create_queue, create_table, queue_arn, QueueSpec, RedriveSpec,
};
use crate::adapters::aws::{AwsClients, AwsConfig, TrustRoots};
use crate::template::stateful;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use std::sync::Once;

/// The services the suites use, by their `AWS_ENDPOINT_URL_<SERVICE>` suffix.
pub use crate::config::AWS_SERVICES as SERVICES;

/// The endpoint for `service`, if the suites should run at all.
pub fn endpoint(service: &str) -> Option<String> {
    let url = crate::config::endpoint_of(crate::config::env_var, service)?;
    assert!(
        crate::config::is_loopback_url(&url),
        "refusing AWS endpoint {url}: the AWS-backed tests only talk to emulators on the loopback interface"
    );
    Some(url)
}

static SKIP_NOTICE: Once = Once::new();

/// Writes to the stderr handle itself: the test harness captures `eprintln!`, and a skip must be
/// seen.
fn notice(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{text}");
}
static ENV: Once = Once::new();

/// Whether every service has an emulator endpoint; prints a skip notice once if not.
pub fn configured() -> bool {
    let missing: Vec<_> = SERVICES.iter().filter(|s| endpoint(s).is_none()).collect();
    if missing.is_empty() {
        return true;
    }
    SKIP_NOTICE.call_once(|| {
        notice(&format!(
            "skipping the AWS-backed tests: no emulator endpoint for {missing:?} \
             (set AWS_ENDPOINT_URL, or AWS_ENDPOINT_URL_<SERVICE>, to a 127.0.0.1 URL)"
        ))
    });
    false
}

/// An SDK config for `service` on its emulator: fixed region, dummy credentials, no IMDS.
pub async fn sdk_config(service: &str) -> Option<SdkConfig> {
    let url = endpoint(service)?;
    Some(emulator_config(Some(url)).await)
}

/// A DynamoDB client on the emulator through a loopback proxy that loses the reply to the first
/// call it forwards (the emulator applies the call; the client hears nothing back), with the
/// functions' time limits ([`crate::adapters::aws::call_timeouts`]): the SDK gives up on that
/// attempt and sends the call again, which the proxy answers. As a Lambda sees a reply lost on
/// the network. `None` (skip) when the emulators are not configured.
pub async fn dynamo_losing_first_reply() -> Option<aws_sdk_dynamodb::Client> {
    let upstream = endpoint("DYNAMODB")?;
    let upstream = upstream.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut client, _)) = listener.accept().await {
            let Ok(mut service) = tokio::net::TcpStream::connect(&upstream).await else { return };
            let lose = std::mem::take(&mut first);
            tokio::spawn(async move {
                let (mut from_client, mut to_client) = client.split();
                let (mut from_service, mut to_service) = service.split();
                let call = tokio::io::copy(&mut from_client, &mut to_service);
                if lose {
                    // The reply is read and dropped; the connection stays open and silent.
                    let mut dropped = tokio::io::sink();
                    let _ = tokio::join!(call, tokio::io::copy(&mut from_service, &mut dropped));
                } else {
                    let _ = tokio::join!(call, tokio::io::copy(&mut from_service, &mut to_client));
                }
            });
        }
    });
    let config =
        emulator_config(Some(url)).await.into_builder().timeout_config(crate::adapters::aws::call_timeouts());
    Some(aws_sdk_dynamodb::Client::new(&config.build()))
}

/// One SDK config for every service, as a Lambda cold start loads it: each client finds its
/// service's endpoint in the environment (`AWS_ENDPOINT_URL_<SERVICE>`, else `AWS_ENDPOINT_URL`,
/// both checked by [`configured`]); region and credentials are fixed here. `None` (skip) when
/// the emulators are not configured.
pub async fn shared_sdk_config() -> Option<SdkConfig> {
    if !configured() {
        return None;
    }
    Some(emulator_config(None).await)
}

async fn emulator_config(endpoint_url: Option<String>) -> SdkConfig {
    ENV.call_once(|| {
        // Anything in the SDK that still looks at the environment finds nothing to leave for.
        std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        // It would make the SDK pass over the emulator endpoints the environment names.
        std::env::remove_var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    });
    let credentials = aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "emulator");
    let loader = aws_config::defaults(BehaviorVersion::latest())
        // The functions' own HTTP client (it serves plain-HTTP emulators as it serves AWS).
        .http_client(crate::adapters::aws::https_client(TrustRoots::Amazon).expect("the HTTPS client builds"))
        .region(Region::new("us-east-1"))
        .credentials_provider(credentials);
    match endpoint_url {
        Some(url) => loader.endpoint_url(url),
        None => loader,
    }
    .load()
    .await
}

/// Clients for every service, or `None` (skip) when the emulators are not configured.
pub async fn clients() -> Option<AwsClients> {
    if !configured() {
        return None;
    }
    Some(AwsClients {
        dynamo: aws_sdk_dynamodb::Client::new(&sdk_config("DYNAMODB").await?),
        sqs: aws_sdk_sqs::Client::new(&sdk_config("SQS").await?),
        kms: aws_sdk_kms::Client::new(&sdk_config("KMS").await?),
        sns: aws_sdk_sns::Client::new(&sdk_config("SNS").await?),
    })
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// A fresh table, as the template defines it (indexes and TTL).
pub async fn fresh_table(clients: &AwsClients) -> String {
    let name = unique("rp-test");
    create_table(&clients.dynamo, &name, &stateful().table).await.expect("the emulator creates a table");
    name
}

/// A fresh time-out queue and its dead-letter queue as the template defines them; returns
/// `(queue url, dead-letter queue url)`.
pub async fn fresh_queue(clients: &AwsClients) -> (String, String) {
    fresh_queue_as(clients, &stateful().queue).await
}

/// A fresh queue as the template defines it but dead-lettering after `max_receive_count`
/// deliveries (the port contract suite counts to fewer).
pub async fn fresh_queue_with(clients: &AwsClients, max_receive_count: u32) -> (String, String) {
    let spec =
        QueueSpec { redrive_policy: Some(RedriveSpec { max_receive_count }), ..stateful().queue.clone() };
    fresh_queue_as(clients, &spec).await
}

async fn fresh_queue_as(clients: &AwsClients, spec: &QueueSpec) -> (String, String) {
    let sqs = &clients.sqs;
    let dlq_url =
        create_queue(sqs, &unique("rp-dlq"), &stateful().dead_letter_queue, None).await.expect("create DLQ");
    let arn = queue_arn(sqs, &dlq_url).await.expect("the DLQ's ARN");
    let url = create_queue(sqs, &unique("rp-queue"), spec, Some(&arn)).await.expect("create queue");
    (url, dlq_url)
}

/// A fresh envelope key as the template defines it; returns its id.
pub async fn fresh_key(clients: &AwsClients) -> String {
    create_key(&clients.kms, &stateful().envelope_key).await.expect("create envelope key")
}

/// A whole fresh deployment of the template's stateful resources: table, queue with DLQ, keys.
pub async fn fresh_config(clients: &AwsClients) -> AwsConfig {
    let table_name = fresh_table(clients).await;
    let (queue_url, dead_letter_queue_url) = fresh_queue(clients).await;
    let envelope_key_id = fresh_key(clients).await;
    AwsConfig {
        table_name,
        queue_url,
        dead_letter_queue_url: Some(dead_letter_queue_url),
        envelope_key_id,
        trust_roots: TrustRoots::Amazon,
    }
}

/// Whether `store` is DynamoDB served by moto, whose `TransactWriteItems` is not isolated from
/// concurrent writers: it deep-copies each table when a transaction starts and puts the copy back
/// when one fails, undoing what concurrent transactions wrote meanwhile. `.ci/run` sets
/// `RP_DYNAMODB_EMULATOR=moto` for its moto pass; cases that race transactions skip their racing
/// part there (they run against DynamoDB Local and the embedded backend).
pub fn transactions_race_unsafely(store: &dyn crate::ports::ItemStore) -> bool {
    let moto = std::env::var("RP_DYNAMODB_EMULATOR").is_ok_and(|v| v == "moto");
    if moto && store.kind() == "dynamodb" {
        notice("skipping a racing-transactions check: moto does not isolate concurrent TransactWriteItems");
        return true;
    }
    false
}
