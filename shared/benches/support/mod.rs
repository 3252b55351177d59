//! What the sandbox benchmarks share: the small customization they time, and a signer.

use rp_shared::sandbox::{self, Job, JwtSigner, OneKey};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A small customization: an HS256 `jwtVerify` with issuer and audience, and a `sha256`.
const SOURCE: &str = r#"
function handler(event, api) {
  const ok = jwtVerify(event.token, {secret: env.RISK_SECRET, issuer: env.RISK_ISSUER, audience: 'rp', algorithms: ['HS256']});
  if (!ok) api.deny('no');
  return {ok, digest: sha256(event.namedUser)};
}"#;

/// `tenant`'s run of [`SOURCE`] on a valid token; its result's `ok` is `true`.
pub fn small_job(tenant: &str) -> Job {
    let exp = jsonwebtoken::get_current_timestamp() + 3600;
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"iss": "https://risk.example.com", "aud": "rp", "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(b"risk-shared-secret"),
    )
    .unwrap();
    Job {
        tenant: tenant.into(),
        source: SOURCE.into(),
        event: json!({"namedUser": "alice@example.com", "token": token}),
        env: BTreeMap::from([
            ("RISK_ISSUER".into(), "https://risk.example.com".into()),
            ("RISK_SECRET".into(), "risk-shared-secret".into()),
        ]),
        issuer: format!("https://rp.example.com/rp/api/apps/{tenant}"),
        timeout: Duration::from_secs(5),
        memory_bytes: sandbox::DEFAULT_MEMORY_BYTES,
    }
}

/// A signer with one fresh key.
pub fn signer() -> Arc<dyn JwtSigner> {
    let key = p256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
    let kid = rp_shared::domain::signing::key_id(&key.verifying_key().into());
    Arc::new(OneKey { kid, key })
}
