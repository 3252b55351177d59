//! Configuration from the environment: one reader for the Lambda front door, the local server
//! and `rp-admin`. Every missing or malformed variable is reported at once.

use crate::adapters::aws::AwsConfig;
use crate::app::keybudget::{DEFAULT_KEY_CALLS_PER_APP, MAX_KEY_CALLS_PER_APP};
use crate::domain::certificates::{DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_OPEN_PER_APP};
use crate::domain::tokens::{TokenSecret, MIN_CHOSEN_TOKEN_LEN};
use crate::http::HttpConfig;
use crate::repo::certificates::DEFAULT_BATCH;
use crate::repo::versioned::DEFAULT_VERSIONS_KEPT;
use std::path::PathBuf;

/// Which adapters a process runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// The embedded data directory: redb, the local queue, the local key file.
    Embedded,
    /// DynamoDB, SQS and KMS, named by the variables the SAM template sets.
    Aws,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `PORT`: the local server's port on 127.0.0.1 (default 8080; 0 picks a free one).
    pub port: u16,
    /// `DATA_DIR`: the embedded backend's directory (default `./.data`).
    pub data_dir: PathBuf,
    /// `LOCAL_ADMIN_TOKEN`: the local server's admin token, instead of a generated one.
    pub admin_token: Option<String>,
    /// `PUBLIC_BASE_URL`: where registration links point.
    pub public_base_url: Option<String>,
    /// `CERT_POLL_BATCH`: most certificate requests one poll hands out.
    pub poll_batch: usize,
    /// `CERT_MAX_ATTEMPTS`: leases a certificate request gets before it is DEAD.
    pub max_attempts: u32,
    pub max_open_per_app: u32,
    /// `KMS_CALLS_PER_APP`: key-service calls an app may make a second; 0: no budget.
    pub key_calls_per_app: u32,
    /// `CONTENT_VERSIONS_KEPT`: earlier versions kept per content customization.
    pub content_versions_kept: u64,
    /// `TABLE_NAME`, `QUEUE_URL`, `KMS_*`, `DEAD_LETTER_QUEUE_URL`: required on AWS.
    pub aws: Option<AwsConfig>,
}

/// Whether `url`'s host is the loopback interface: `localhost`, `[::1]` or 127.0.0.0/8. The
/// host is read as a URL's authority is (after `scheme://`, before any path, port or user info),
/// so `http://127.0.0.1.example.com` and `http://localhost@example.com` are not loopback.
pub fn is_loopback_url(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return false;
    }
    let host = if authority.starts_with('[') {
        authority.split_inclusive(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host == "[::1]"
        || host.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// The services of the AWS backend, by their `AWS_ENDPOINT_URL_<SERVICE>` suffix.
pub const AWS_SERVICES: [&str; 4] = ["DYNAMODB", "SQS", "KMS", "SNS"];

/// An environment variable, `None` when unset or empty: how every reader here sees them.
pub fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The endpoint `get` names for `service`: its `AWS_ENDPOINT_URL_<SERVICE>`, else
/// `AWS_ENDPOINT_URL`, as the SDK reads them.
pub fn endpoint_of(get: impl Fn(&str) -> Option<String>, service: &str) -> Option<String> {
    get(&format!("AWS_ENDPOINT_URL_{service}")).or_else(|| get("AWS_ENDPOINT_URL"))
}

/// `Ok` when every AWS service the backend calls has an endpoint on the loopback interface
/// ([`endpoint_of`]): an emulator, never an AWS account. Otherwise the services that would
/// reach beyond it. `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` makes the SDK ignore those variables,
/// so it is refused too.
pub fn emulator_endpoints(get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    let mut problems = Vec::new();
    if get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        problems.push(
            "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true: the SDK would ignore the emulator endpoints"
                .to_owned(),
        );
    }
    for service in AWS_SERVICES {
        match endpoint_of(&get, service) {
            Some(url) if is_loopback_url(&url) => {}
            Some(url) => {
                problems.push(format!("the {service} endpoint {url} is not on the loopback interface"))
            }
            None => problems.push(format!(
                "no emulator endpoint for {service} (AWS_ENDPOINT_URL_{service} or AWS_ENDPOINT_URL)"
            )),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ConfigError(problems))
    }
}

/// A number from 0 to `max`, or `default` when unset.
fn at_most(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
    (default, max): (u32, u32),
    problems: &mut Vec<String>,
) -> u32 {
    match get(name) {
        None => default,
        Some(text) => match text.parse::<u32>() {
            Ok(n) if n <= max => n,
            _ => {
                problems.push(format!("{name} must be a number from 0 to {max}, not '{text}'"));
                default
            }
        },
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid configuration: {}", .0.join("; "))]
pub struct ConfigError(pub Vec<String>);

/// A positive number, or `default` when unset.
fn positive<T: std::str::FromStr + PartialOrd + Default>(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: T,
    problems: &mut Vec<String>,
) -> T {
    match get(name) {
        None => default,
        Some(text) => match text.parse::<T>() {
            Ok(n) if n > T::default() => n,
            _ => {
                problems.push(format!("{name} must be a positive number, not '{text}'"));
                default
            }
        },
    }
}

impl Config {
    pub fn from_env(backend: BackendKind) -> Result<Self, ConfigError> {
        Self::from_lookup(env_var, backend)
    }

    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
        backend: BackendKind,
    ) -> Result<Self, ConfigError> {
        let mut problems = Vec::new();
        let port = match get("PORT") {
            None => 8080,
            Some(text) => text.parse().unwrap_or_else(|_| {
                problems.push(format!("PORT must be a port number, not '{text}'"));
                0
            }),
        };
        let admin_token = get("LOCAL_ADMIN_TOKEN");
        if admin_token.as_deref().is_some_and(|t| TokenSecret::parse_chosen(t).is_none()) {
            problems.push(format!(
                "LOCAL_ADMIN_TOKEN must be {MIN_CHOSEN_TOKEN_LEN} to 512 printable ASCII characters without spaces"
            ));
        }
        let poll_batch = positive(&get, "CERT_POLL_BATCH", DEFAULT_BATCH, &mut problems);
        let max_attempts = positive(&get, "CERT_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS, &mut problems);
        let max_open_per_app =
            positive(&get, "CERT_MAX_OPEN_PER_APP", DEFAULT_MAX_OPEN_PER_APP, &mut problems);
        let content_versions_kept =
            positive(&get, "CONTENT_VERSIONS_KEPT", DEFAULT_VERSIONS_KEPT, &mut problems);
        let budget = (DEFAULT_KEY_CALLS_PER_APP, MAX_KEY_CALLS_PER_APP);
        let key_calls_per_app = at_most(&get, "KMS_CALLS_PER_APP", budget, &mut problems);
        let aws = match backend {
            BackendKind::Embedded => None,
            BackendKind::Aws => match AwsConfig::from_lookup(&get) {
                Ok(aws) => Some(aws),
                Err(invalid) => {
                    problems.extend(invalid.0);
                    None
                }
            },
        };
        if !problems.is_empty() {
            return Err(ConfigError(problems));
        }
        Ok(Self {
            port,
            data_dir: get("DATA_DIR").map(PathBuf::from).unwrap_or_else(|| ".data".into()),
            admin_token,
            public_base_url: get("PUBLIC_BASE_URL"),
            poll_batch,
            max_attempts,
            max_open_per_app,
            key_calls_per_app,
            content_versions_kept,
            aws,
        })
    }

    /// What the routers need; `base_url` stands in when `PUBLIC_BASE_URL` is unset.
    pub fn http(&self, base_url: &str) -> HttpConfig {
        HttpConfig {
            public_base_url: self.public_base_url.clone().unwrap_or_else(|| base_url.to_owned()),
            poll_batch: self.poll_batch,
            max_attempts: self.max_attempts,
            max_open_per_app: self.max_open_per_app,
            key_calls_per_app: self.key_calls_per_app,
            content_versions_kept: self.content_versions_kept,
            ..HttpConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned())
    }

    #[test]
    fn defaults_hold_without_variables() {
        let c = Config::from_lookup(lookup(&[]), BackendKind::Embedded).unwrap();
        assert_eq!((c.port, c.poll_batch, c.max_attempts), (8080, DEFAULT_BATCH, DEFAULT_MAX_ATTEMPTS));
        assert_eq!(c.key_calls_per_app, DEFAULT_KEY_CALLS_PER_APP);
        assert_eq!(c.data_dir, PathBuf::from(".data"));
        assert_eq!(c.aws, None);
    }

    #[test]
    fn every_bad_variable_is_reported_at_once() {
        let err = Config::from_lookup(
            lookup(&[
                ("PORT", "eighty"),
                ("CERT_POLL_BATCH", "0"),
                ("CERT_MAX_ATTEMPTS", "x"),
                ("KMS_CALLS_PER_APP", "1001"),
                ("QUEUE_URL", "q"),
            ]),
            BackendKind::Aws,
        )
        .unwrap_err();
        assert_eq!(
            err.0,
            vec![
                "PORT must be a port number, not 'eighty'",
                "CERT_POLL_BATCH must be a positive number, not '0'",
                "CERT_MAX_ATTEMPTS must be a positive number, not 'x'",
                "KMS_CALLS_PER_APP must be a number from 0 to 1000, not '1001'",
                "TABLE_NAME is not set",
                "KMS_ENVELOPE_KEY_ID is not set",
            ]
        );
    }

    #[test]
    fn only_the_loopback_interface_is_loopback() {
        for url in [
            "http://127.0.0.1:4566",
            "http://127.9.0.1",
            "https://localhost:8000/",
            "http://LOCALHOST",
            "http://[::1]:8000",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "https://dynamodb.us-east-1.amazonaws.com",
            "http://127.0.0.1.example.com",
            "http://localhost.example.com:80",
            "http://localhost@example.com",
            "http://user@127.0.0.1",
            "http://[::2]",
            "127.0.0.1:4566",
            "http://10.0.0.1",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }

    #[test]
    fn every_service_needs_an_emulator_on_loopback() {
        assert_eq!(emulator_endpoints(lookup(&[("AWS_ENDPOINT_URL", "http://127.0.0.1:1")])), Ok(()));
        let ignored = emulator_endpoints(lookup(&[
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
            ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "TRUE"),
        ]));
        assert!(ignored.is_err_and(|e| e.0.len() == 1 && e.0[0].contains("would ignore")));
        let err = emulator_endpoints(lookup(&[
            ("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:2"),
            ("AWS_ENDPOINT_URL_SQS", "https://sqs.us-east-1.amazonaws.com"),
        ]))
        .unwrap_err();
        assert_eq!(
            err.0,
            vec![
                "the SQS endpoint https://sqs.us-east-1.amazonaws.com is not on the loopback interface",
                "no emulator endpoint for KMS (AWS_ENDPOINT_URL_KMS or AWS_ENDPOINT_URL)",
                "no emulator endpoint for SNS (AWS_ENDPOINT_URL_SNS or AWS_ENDPOINT_URL)",
            ]
        );
    }

    /// Every variable the routers take reaches them, each under its own name.
    #[test]
    fn the_http_settings_come_from_the_same_reading() {
        let c = Config::from_lookup(lookup(&[("CERT_MAX_ATTEMPTS", "2")]), BackendKind::Embedded).unwrap();
        let http = c.http("http://127.0.0.1:1");
        assert_eq!((http.max_attempts, http.public_base_url.as_str()), (2, "http://127.0.0.1:1"));
        const SET: &[(&str, &str)] = &[
            ("CERT_POLL_BATCH", "3"),
            ("CERT_MAX_ATTEMPTS", "4"),
            ("CERT_MAX_OPEN_PER_APP", "5"),
            ("CONTENT_VERSIONS_KEPT", "6"),
            ("KMS_CALLS_PER_APP", "7"),
            ("PUBLIC_BASE_URL", "https://rp.example.com"),
        ];
        let http =
            Config::from_lookup(lookup(SET), BackendKind::Embedded).unwrap().http("http://127.0.0.1:1");
        let read = (http.poll_batch, http.max_attempts, http.max_open_per_app, http.content_versions_kept);
        assert_eq!((read, http.public_base_url.as_str()), ((3, 4, 5, 6), "https://rp.example.com"));
        assert_eq!(http.key_calls_per_app, 7);
        let off = Config::from_lookup(lookup(&[("KMS_CALLS_PER_APP", "0")]), BackendKind::Embedded);
        assert_eq!(off.unwrap().http("http://127.0.0.1:1").key_calls_per_app, 0, "0 turns the budget off");
    }
}
