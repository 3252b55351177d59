//! Which certificate authorities the AWS clients trust, and the SDK configuration built on it.
//!
//! By default only Amazon Trust Services' roots (`amazon-trust-roots.pem`), the authorities
//! behind every AWS service endpoint: a certificate any other authority issued for
//! `dynamodb.<region>.amazonaws.com` is refused, and a cold start does not read and parse the
//! system's ~150 roots (about 3 ms of a 6 ms init; docs/performance.md).
//! `TLS_TRUST_ROOTS=system` trusts the platform's store instead, for endpoints behind another
//! authority (a TLS-inspecting proxy, an emulator served over HTTPS).
//!
//! Every call has time limits ([`call_timeouts`]): a service that stalls costs a request a 503
//! problem well inside the function's time-out, not the whole invocation.

use aws_config::environment::EnvironmentVariableCredentialsProvider;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, SdkConfig};
use aws_sdk_dynamodb::config::{ProvideCredentials, SharedHttpClient};
use aws_smithy_http_client::proxy::ProxyConfig;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode, TlsContext, TrustStore};
use aws_smithy_http_client::{Builder, ConnectorBuilder, HttpClientError};
use std::time::Duration;

/// Amazon Root CA 1–4 and Starfield Services Root CA G2, as PEM.
pub const AMAZON_TRUST_ROOTS: &str = include_str!("amazon-trust-roots.pem");

/// `TLS_TRUST_ROOTS`: the roots of trust for AWS endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrustRoots {
    /// Amazon Trust Services' roots only (the default).
    #[default]
    Amazon,
    /// The platform's trust store (`SSL_CERT_FILE`, `SSL_CERT_DIR`, else the system's).
    System,
}

impl TrustRoots {
    /// Reads `TLS_TRUST_ROOTS` (`amazon` when unset), or says what is wrong with it.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        match get("TLS_TRUST_ROOTS").as_deref().map(str::trim) {
            None | Some("") => Ok(Self::Amazon),
            Some(v) if v.eq_ignore_ascii_case("amazon") => Ok(Self::Amazon),
            Some(v) if v.eq_ignore_ascii_case("system") => Ok(Self::System),
            Some(other) => Err(format!("TLS_TRUST_ROOTS must be 'amazon' or 'system', not '{other}'")),
        }
    }

    fn store(self) -> TrustStore {
        match self {
            Self::Amazon => TrustStore::empty().with_pem_certificate(AMAZON_TRUST_ROOTS.as_bytes()),
            Self::System => TrustStore::default(),
        }
    }
}

/// How long one attempt at a call may take (connecting, sending, the whole answer). A DynamoDB,
/// SQS, KMS or SNS call answers in milliseconds; one that has not answered in this time is
/// stalled, and the SDK's retry sends it again (its standard mode: three attempts at most).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a call may take in all, its retries included: then it fails as unavailable (a 503
/// problem). Under the API functions' 10 s time-out (`infra/template.yaml`), with time left to
/// answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(7);
/// How long opening a connection may take (the SDK's default since its 2023-11-09 behaviour).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// The time limits of every AWS call. The SDK sets only a connect time-out by default: a call
/// whose connection opened and then went quiet would wait until Lambda ends the invocation, and
/// API Gateway would answer for it with an error that is not a problem document.
pub fn call_timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .operation_timeout(CALL_TIMEOUT)
        .build()
}

/// The SDK's own HTTPS client (rustls over aws-lc, proxies from the environment, as the SDK's
/// default client) with `roots` as its trust store. Plain-HTTP endpoints (the emulators) work
/// through it unchanged.
pub fn https_client(roots: TrustRoots) -> Result<SharedHttpClient, HttpClientError> {
    let context = TlsContext::builder().with_trust_store(roots.store()).build()?;
    Ok(Builder::new().build_with_connector_fn(move |settings, components| {
        let mut builder = ConnectorBuilder::default()
            .tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc))
            .tls_context(context.clone());
        builder.set_connector_settings(settings.cloned());
        if let Some(components) = components {
            builder.set_sleep_impl(components.sleep_impl());
        }
        builder.set_proxy_config(Some(ProxyConfig::from_env()));
        builder.build()
    }))
}

/// The SDK configuration from the environment (region, credentials, endpoints), over
/// [`https_client`], with [`call_timeouts`]. One per process: every client is built from it.
///
/// Credentials: when the environment holds them (as on Lambda, which sets the execution role's
/// there), they are read from it directly. That is the default chain's first provider and what
/// the chain would answer, but the chain also builds an STS client, an IMDS client and a profile
/// reader at every cold start, for providers it would never reach.
pub async fn sdk_config(roots: TrustRoots) -> Result<SdkConfig, HttpClientError> {
    let loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(https_client(roots)?)
        .timeout_config(call_timeouts());
    let from_env = EnvironmentVariableCredentialsProvider::new();
    let loader = match from_env.provide_credentials().await {
        Ok(_) => loader.credentials_provider(from_env),
        Err(_) => loader,
    };
    Ok(loader.load().await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;

    #[test]
    fn the_amazon_roots_are_five_trust_anchors() {
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(AMAZON_TRUST_ROOTS.as_bytes())
                .collect::<Result<_, _>>()
                .expect("the bundled roots are PEM");
        assert_eq!(certs.len(), 5);
        for cert in &certs {
            // What rustls's root store does with each: a malformed one would panic at the first
            // connection inside the SDK's client, so it is checked here.
            webpki::anchor_from_trusted_cert(cert).expect("a usable trust anchor");
        }
        let text =
            String::from_utf8_lossy(&certs.iter().flat_map(|c| c.to_vec()).collect::<Vec<u8>>()).into_owned();
        for name in ["Amazon Root CA 1", "Amazon Root CA 2", "Amazon Root CA 3", "Amazon Root CA 4"] {
            assert!(text.contains(name), "{name} is bundled");
        }
        assert!(text.contains("Starfield Services Root Certificate Authority - G2"));
    }

    #[test]
    fn trust_roots_are_read_from_the_environment() {
        let with =
            |value: &'static str| move |name: &str| (name == "TLS_TRUST_ROOTS").then(|| value.to_owned());
        assert_eq!(TrustRoots::from_lookup(&|_: &str| None), Ok(TrustRoots::Amazon));
        assert_eq!(TrustRoots::from_lookup(&with("")), Ok(TrustRoots::Amazon));
        assert_eq!(TrustRoots::from_lookup(&with("Amazon")), Ok(TrustRoots::Amazon));
        assert_eq!(TrustRoots::from_lookup(&with("system")), Ok(TrustRoots::System));
        assert_eq!(
            TrustRoots::from_lookup(&with("mozilla")),
            Err("TLS_TRUST_ROOTS must be 'amazon' or 'system', not 'mozilla'".to_owned())
        );
    }
}
