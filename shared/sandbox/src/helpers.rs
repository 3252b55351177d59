//! The helpers of DECISIONS §8 as plain Rust functions of bytes and JSON, so they are tested
//! against published vectors without a JavaScript engine; `sandbox` exposes them to scripts.
//! JWTs are decoded and verified with `jsonwebtoken`, never parsed by hand.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::HashSet;

/// Lowercase hex SHA-256.
pub fn sha256(value: &[u8]) -> String {
    hex::encode(Sha256::digest(value))
}

/// Lowercase hex HMAC-SHA256 of `value` under `key`.
pub fn hmac_sha256(key: &[u8], value: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(value);
    hex::encode(mac.finalize().into_bytes())
}

/// Standard base64 with padding.
pub fn base64(value: &[u8]) -> String {
    STANDARD.encode(value)
}

/// A helper's failure, thrown into the script as an `Error` with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HelperError(pub String);

fn fail(message: impl Into<String>) -> HelperError {
    HelperError(message.into())
}

/// `{header, payload}` of a decoded JWT, as the helpers answer.
fn header_and_payload(data: jsonwebtoken::TokenData<Map<String, Value>>) -> Result<Value, HelperError> {
    let header = serde_json::to_value(&data.header).map_err(|e| fail(e.to_string()))?;
    Ok(json!({"header": header, "payload": data.claims}))
}

/// `{header, payload}` of a JWT, without verifying anything.
pub fn decode_jwt(token: &str) -> Result<Value, HelperError> {
    let data = jsonwebtoken::dangerous::insecure_decode::<Map<String, Value>>(token)
        .map_err(|e| fail(format!("jwtDecodeJwt: not a JWT: {e}")))?;
    header_and_payload(data)
}

/// The options of `jwtDecodeVerify` and `jwtVerify`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifyOptions {
    pub issuer: Option<OneOrMany>,
    pub audience: Option<OneOrMany>,
    pub algorithms: Option<Vec<String>>,
    pub clock_tolerance_secs: Option<u64>,
    pub public_key_pem: Option<String>,
    pub jwks: Option<Value>,
    pub secret: Option<String>,
}

/// A string or a list of strings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn list(&self) -> Vec<String> {
        match self {
            OneOrMany::One(one) => vec![one.clone()],
            OneOrMany::Many(many) => many.clone(),
        }
    }
}

/// The algorithms a key of each kind may verify: never `none`, and never a public key used as
/// an HMAC secret.
const ASYMMETRIC: [Algorithm; 2] = [Algorithm::ES256, Algorithm::RS256];

fn algorithm(name: &str) -> Result<Algorithm, HelperError> {
    match name {
        "ES256" => Ok(Algorithm::ES256),
        "RS256" => Ok(Algorithm::RS256),
        "HS256" => Ok(Algorithm::HS256),
        other => Err(fail(format!("algorithms: '{other}' is not one of ES256, RS256, HS256"))),
    }
}

/// The most `clockToleranceSecs` may be (about 31 years): the check subtracts it from the time
/// now, which must stay after 1970.
pub const MAX_CLOCK_TOLERANCE_SECS: u64 = 1_000_000_000;

/// Verifies `token` with the key and rules in `options`; `{header, payload}` or why not.
pub fn decode_verify(token: &str, options: &VerifyOptions) -> Result<Value, HelperError> {
    if options.clock_tolerance_secs.is_some_and(|secs| secs > MAX_CLOCK_TOLERANCE_SECS) {
        return Err(fail(format!("clockToleranceSecs: at most {MAX_CLOCK_TOLERANCE_SECS} seconds")));
    }
    let header = jsonwebtoken::decode_header(token).map_err(|e| fail(format!("not a JWT: {e}")))?;
    let keys = [&options.public_key_pem.is_some(), &options.jwks.is_some(), &options.secret.is_some()];
    if keys.iter().filter(|k| ***k).count() != 1 {
        return Err(fail("give exactly one key: publicKeyPem, jwks or secret"));
    }
    // An empty secret (an unset variable, say) would verify what anyone signs with it.
    if options.secret.as_deref() == Some("") {
        return Err(fail("secret: must not be empty"));
    }
    let allowed: Vec<Algorithm> = match (&options.secret, &options.algorithms) {
        (Some(_), None) => vec![Algorithm::HS256],
        (None, None) => ASYMMETRIC.to_vec(),
        (_, Some(names)) => names.iter().map(|n| algorithm(n)).collect::<Result<_, _>>()?,
    };
    let fits = |alg: &Algorithm| match options.secret {
        Some(_) => *alg == Algorithm::HS256,
        None => ASYMMETRIC.contains(alg),
    };
    if !allowed.contains(&header.alg) || !fits(&header.alg) {
        return Err(fail(format!("the token's algorithm {:?} is not allowed with this key", header.alg)));
    }
    let key = if let Some(secret) = &options.secret {
        DecodingKey::from_secret(secret.as_bytes())
    } else if let Some(pem) = &options.public_key_pem {
        match header.alg {
            Algorithm::ES256 => DecodingKey::from_ec_pem(pem.as_bytes()),
            _ => DecodingKey::from_rsa_pem(pem.as_bytes()),
        }
        .map_err(|e| fail(format!("publicKeyPem: {e}")))?
    } else {
        let set: JwkSet = serde_json::from_value(options.jwks.clone().unwrap_or_default())
            .map_err(|e| fail(format!("jwks: not a JWK set: {e}")))?;
        let jwk = match &header.kid {
            Some(kid) => set.find(kid).ok_or_else(|| fail(format!("jwks: no key with kid '{kid}'")))?,
            None if set.keys.len() == 1 => &set.keys[0],
            None => return Err(fail("jwks: the token has no kid and the set has several keys")),
        };
        DecodingKey::from_jwk(jwk).map_err(|e| fail(format!("jwks: {e}")))?
    };
    let mut validation = Validation::new(header.alg);
    validation.algorithms = vec![header.alg];
    validation.leeway = options.clock_tolerance_secs.unwrap_or(0);
    // `jsonwebtoken` checks `nbf` only when asked: a token is not valid before its time.
    validation.validate_nbf = true;
    validation.validate_aud = options.audience.is_some();
    if let Some(issuer) = &options.issuer {
        validation.set_issuer(&issuer.list());
    }
    if let Some(audience) = &options.audience {
        validation.set_audience(&audience.list());
    }
    // An `exp` is checked when present; tokens without one are accepted, as most libraries do.
    // An issuer or audience asked for must be there: `jsonwebtoken` checks each only when the
    // token has it, so a token without `iss` would pass any issuer.
    validation.required_spec_claims = HashSet::new();
    for (asked, claim) in [(options.issuer.is_some(), "iss"), (options.audience.is_some(), "aud")] {
        if asked {
            validation.required_spec_claims.insert(claim.to_owned());
        }
    }
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|e| fail(format!("the token does not verify: {e}")))?;
    header_and_payload(data)
}

/// The options of `jwtCreateSignedJwt`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignOptions {
    /// Lifetime; default 300 s, at most a day.
    pub expires_in_secs: Option<u64>,
    pub audience: Option<OneOrMany>,
    pub subject: Option<String>,
    pub jwt_id: Option<String>,
}

pub const DEFAULT_JWT_LIFETIME_SECS: u64 = 300;
pub const MAX_JWT_LIFETIME_SECS: u64 = 86_400;

/// The signing input (`header.payload`) of a token we sign: ES256 under `kid`, with `iss` set
/// to the tenant's issuer whatever the payload says (so one tenant cannot mint another's
/// tokens), `iat` now and `exp` from the options.
pub fn signing_input(
    payload: &Value,
    options: &SignOptions,
    issuer: &str,
    kid: &str,
    now_secs: u64,
) -> Result<String, HelperError> {
    let mut claims = match payload {
        Value::Object(map) => map.clone(),
        _ => return Err(fail("jwtCreateSignedJwt: the payload must be an object")),
    };
    let lifetime = options.expires_in_secs.unwrap_or(DEFAULT_JWT_LIFETIME_SECS);
    if lifetime == 0 || lifetime > MAX_JWT_LIFETIME_SECS {
        return Err(fail(format!("expiresInSecs: must be between 1 and {MAX_JWT_LIFETIME_SECS}")));
    }
    claims.insert("iss".into(), issuer.into());
    claims.insert("iat".into(), now_secs.into());
    claims.insert("exp".into(), (now_secs + lifetime).into());
    if let Some(audience) = &options.audience {
        claims.insert("aud".into(), json!(audience.list()));
    }
    if let Some(subject) = &options.subject {
        claims.insert("sub".into(), subject.clone().into());
    }
    if let Some(id) = &options.jwt_id {
        claims.insert("jti".into(), id.clone().into());
    }
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": kid});
    let encode = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).expect("JSON values serialize"));
    Ok(format!("{}.{}", encode(&header), encode(&Value::Object(claims))))
}

/// The token: the signing input and the 64-byte `r ‖ s` signature.
pub fn signed_token(signing_input: &str, signature: &[u8]) -> String {
    format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

/// The public JWK of our ES256 signing key (RFC 7517, with RFC 7518 §6.2's EC members).
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Jwk {
    #[schema(example = "EC")]
    pub kty: &'static str,
    #[schema(example = "P-256")]
    pub crv: &'static str,
    #[serde(rename = "use")]
    #[schema(example = "sig")]
    pub use_: &'static str,
    #[schema(example = "ES256")]
    pub alg: &'static str,
    /// The signing key's id, the `kid` in the header of every token it signs.
    pub kid: String,
    /// The point's x coordinate, base64url without padding (32 bytes).
    #[schema(pattern = "^[A-Za-z0-9_-]{43}$")]
    pub x: String,
    /// The point's y coordinate, base64url without padding (32 bytes).
    #[schema(pattern = "^[A-Za-z0-9_-]{43}$")]
    pub y: String,
}

/// The public JWK of our ES256 signing key.
pub fn jwk(key: &p256::PublicKey, kid: &str) -> Jwk {
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    let point = key.to_encoded_point(false);
    let coordinate = |c: Option<&p256::FieldBytes>| URL_SAFE_NO_PAD.encode(c.expect("an uncompressed point"));
    Jwk {
        kty: "EC",
        crv: "P-256",
        use_: "sig",
        alg: "ES256",
        kid: kid.to_owned(),
        x: coordinate(point.x()),
        y: coordinate(point.y()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS 180-2, appendix B.1 and B.2.
    #[test]
    fn sha256_matches_fips_180_2() {
        assert_eq!(sha256(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }

    /// RFC 4231, test cases 1, 2 and 6.
    #[test]
    fn hmac_matches_rfc_4231() {
        assert_eq!(
            hmac_sha256(&[0x0b; 20], b"Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hmac_sha256(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    /// RFC 4648, section 10.
    #[test]
    fn base64_matches_rfc_4648() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    /// RFC 7515, appendix A.3: the ES256 example. Its `exp` (2011-03-22) is long past, so it
    /// verifies as signed but is refused as expired, unless the clock tolerance reaches back.
    const RFC7515_A3: &str = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";

    fn rfc7515_jwks() -> Value {
        json!({"keys": [{"kty": "EC", "crv": "P-256",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]})
    }

    #[test]
    fn the_rfc_7515_es256_example_is_signed_but_expired() {
        let decoded = decode_jwt(RFC7515_A3).unwrap();
        assert_eq!(decoded["payload"]["iss"], "joe");
        assert_eq!(decoded["header"]["alg"], "ES256");
        let options = VerifyOptions {
            jwks: Some(rfc7515_jwks()),
            issuer: Some(OneOrMany::One("joe".into())),
            ..Default::default()
        };
        let err = decode_verify(RFC7515_A3, &options).unwrap_err();
        assert!(err.0.contains("Expired"), "{err}");
        let since = jsonwebtoken::get_current_timestamp() - 1_300_819_380 + 60;
        let tolerant = VerifyOptions { clock_tolerance_secs: Some(since), ..options };
        assert_eq!(
            decode_verify(RFC7515_A3, &tolerant).unwrap()["payload"]["http://example.com/is_root"],
            true
        );
        // A flipped signature byte, another issuer, or an HMAC secret do not verify.
        let mut forged = RFC7515_A3.to_owned();
        forged.replace_range(forged.len() - 2.., "Q1");
        assert!(decode_verify(&forged, &tolerant).is_err());
        let wrong_iss = VerifyOptions {
            issuer: Some(OneOrMany::One("eve".into())),
            jwks: Some(rfc7515_jwks()),
            clock_tolerance_secs: Some(since),
            ..Default::default()
        };
        assert!(decode_verify(RFC7515_A3, &wrong_iss).is_err());
        let as_secret = VerifyOptions {
            secret: Some("x".into()),
            clock_tolerance_secs: Some(since),
            ..Default::default()
        };
        assert!(decode_verify(RFC7515_A3, &as_secret).unwrap_err().0.contains("not allowed"));
        // A tolerance up to the bound is taken; past it, refused, saying so, rather than
        // overflowing the check.
        let bound = VerifyOptions { clock_tolerance_secs: Some(MAX_CLOCK_TOLERANCE_SECS), ..tolerant };
        assert!(decode_verify(RFC7515_A3, &bound).is_ok());
        let boundless = VerifyOptions {
            jwks: Some(rfc7515_jwks()),
            clock_tolerance_secs: Some(2_000_000_000),
            ..Default::default()
        };
        let err = decode_verify(RFC7515_A3, &boundless).unwrap_err();
        assert!(err.0.contains("clockToleranceSecs: at most 1000000000"), "{err}");
    }

    /// `claims` signed HS256 under `secret`, by `jsonwebtoken` itself.
    fn hs256(claims: &Value, secret: &[u8]) -> String {
        let key = jsonwebtoken::EncodingKey::from_secret(secret);
        jsonwebtoken::encode(&jsonwebtoken::Header::new(Algorithm::HS256), claims, &key).unwrap()
    }

    #[test]
    fn hs256_and_algorithm_rules() {
        let exp = jsonwebtoken::get_current_timestamp() + 600;
        let claims = json!({"iss": "risk-engine", "aud": "rp", "exp": exp, "score": 12});
        let token = hs256(&claims, b"s3cret");
        let with = |secret: &str| VerifyOptions {
            secret: Some(secret.into()),
            issuer: Some(OneOrMany::One("risk-engine".into())),
            audience: Some(OneOrMany::Many(vec!["rp".into()])),
            ..Default::default()
        };
        assert_eq!(decode_verify(&token, &with("s3cret")).unwrap()["payload"]["score"], 12);
        assert!(decode_verify(&token, &with("wrong")).is_err());
        let forged = hs256(&claims, b"");
        assert_eq!(decode_verify(&forged, &with("")).unwrap_err().0, "secret: must not be empty");
        let wrong_aud = VerifyOptions { audience: Some(OneOrMany::One("other".into())), ..with("s3cret") };
        assert!(decode_verify(&token, &wrong_aud).is_err());
        // An HS256 token against a public key (algorithm confusion) and `none` are refused.
        let confused = VerifyOptions { jwks: Some(rfc7515_jwks()), ..Default::default() };
        assert!(decode_verify(&token, &confused).unwrap_err().0.contains("not allowed"));
        let none = "eyJhbGciOiJub25lIn0.eyJpc3MiOiJqb2UifQ.";
        assert!(decode_verify(none, &with("s3cret")).is_err());
        let both = VerifyOptions { jwks: Some(rfc7515_jwks()), ..with("k") };
        assert!(decode_verify(RFC7515_A3, &both).unwrap_err().0.contains("exactly one key"));
        assert!(algorithm("none").is_err());
    }

    /// An ES256 token signed as `jwtCreateSignedJwt` signs, with `header` as its header.
    fn es256_token(key: &p256::ecdsa::SigningKey, header: Value) -> String {
        use p256::ecdsa::signature::Signer as _;
        let exp = jsonwebtoken::get_current_timestamp() + 600;
        let encode = |v: &Value| URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap());
        let input = format!("{}.{}", encode(&header), encode(&json!({"sub": "alice", "exp": exp})));
        let signature: p256::ecdsa::Signature = key.sign(input.as_bytes());
        signed_token(&input, &signature.to_bytes())
    }

    #[test]
    fn es256_keys_as_pem_or_jwks_and_the_algorithms_they_allow() {
        use p256::pkcs8::{EncodePublicKey, LineEnding};
        let key = p256::ecdsa::SigningKey::from_bytes(&[7u8; 32].into()).unwrap();
        let other = p256::ecdsa::SigningKey::from_bytes(&[9u8; 32].into()).unwrap();
        let public = p256::PublicKey::from(key.verifying_key());
        let token = es256_token(&key, json!({"alg": "ES256", "kid": "k1"}));
        let pem = public.to_public_key_pem(LineEnding::LF).unwrap();
        let with_pem = VerifyOptions { public_key_pem: Some(pem), ..Default::default() };
        assert_eq!(decode_verify(&token, &with_pem).unwrap()["payload"]["sub"], "alice");
        // `algorithms` narrows what the key may verify.
        let rs_only = VerifyOptions { algorithms: Some(vec!["RS256".into()]), ..with_pem };
        assert!(decode_verify(&token, &rs_only).unwrap_err().0.contains("not allowed"));
        // A JWK set: the key is picked by the token's kid; without one, only a set of one key.
        let set = json!({"keys": [jwk(&other.verifying_key().into(), "k0"), jwk(&public, "k1")]});
        let with_set = || VerifyOptions { jwks: Some(set.clone()), ..Default::default() };
        assert_eq!(decode_verify(&token, &with_set()).unwrap()["payload"]["sub"], "alice");
        let unknown = es256_token(&key, json!({"alg": "ES256", "kid": "k9"}));
        assert_eq!(decode_verify(&unknown, &with_set()).unwrap_err().0, "jwks: no key with kid 'k9'");
        let no_kid = es256_token(&key, json!({"alg": "ES256"}));
        let err = decode_verify(&no_kid, &with_set()).unwrap_err();
        assert_eq!(err.0, "jwks: the token has no kid and the set has several keys");
        let one = VerifyOptions { jwks: Some(json!({"keys": [jwk(&public, "k1")]})), ..Default::default() };
        assert!(decode_verify(&no_kid, &one).is_ok());
    }

    #[test]
    fn a_minted_tokens_lifetime_is_one_second_to_a_day() {
        let sign = |secs| {
            let options = SignOptions { expires_in_secs: Some(secs), ..Default::default() };
            signing_input(&json!({}), &options, "iss", "kid", 1_000)
        };
        for refused in [0, MAX_JWT_LIFETIME_SECS + 1] {
            assert!(sign(refused).unwrap_err().0.starts_with("expiresInSecs:"), "{refused}");
        }
        for taken in [1, MAX_JWT_LIFETIME_SECS] {
            let input = sign(taken).unwrap();
            let payload = URL_SAFE_NO_PAD.decode(input.split('.').nth(1).unwrap()).unwrap();
            let claims: Value = serde_json::from_slice(&payload).unwrap();
            assert_eq!((claims["iat"].as_u64(), claims["exp"].as_u64()), (Some(1_000), Some(1_000 + taken)));
        }
    }

    #[test]
    fn an_issuer_or_audience_asked_for_must_be_in_the_token() {
        let exp = jsonwebtoken::get_current_timestamp() + 600;
        let sign = |claims: Value| hs256(&claims, b"s3cret");
        let secret = || VerifyOptions { secret: Some("s3cret".into()), ..Default::default() };
        let issuer = VerifyOptions { issuer: Some(OneOrMany::One("risk-engine".into())), ..secret() };
        let audience = VerifyOptions { audience: Some(OneOrMany::One("rp".into())), ..secret() };
        let bare = sign(json!({"exp": exp}));
        let missing = |claim: &str| format!("the token does not verify: Missing required claim: {claim}");
        assert_eq!(decode_verify(&bare, &issuer).unwrap_err().0, missing("iss"));
        assert_eq!(decode_verify(&bare, &audience).unwrap_err().0, missing("aud"));
        assert!(decode_verify(&bare, &secret()).is_ok(), "neither asked for");
        let full = sign(json!({"exp": exp, "iss": "risk-engine", "aud": "rp"}));
        assert!(decode_verify(&full, &issuer).is_ok() && decode_verify(&full, &audience).is_ok());
    }

    #[test]
    fn a_token_is_refused_before_its_nbf_unless_the_tolerance_reaches_it() {
        let now = jsonwebtoken::get_current_timestamp();
        let sign = |claims: Value| hs256(&claims, b"s3cret");
        let options = |tolerance| VerifyOptions {
            secret: Some("s3cret".into()),
            clock_tolerance_secs: tolerance,
            ..Default::default()
        };
        let early = sign(json!({"nbf": now + 600, "exp": now + 1200}));
        let err = decode_verify(&early, &options(None)).unwrap_err();
        assert!(err.0.contains("ImmatureSignature"), "{err}");
        assert!(
            decode_verify(&early, &options(Some(60))).is_err(),
            "a minute's tolerance does not reach ten"
        );
        assert!(
            decode_verify(&early, &options(Some(900))).is_ok(),
            "the tolerance covers nbf as it covers exp"
        );
        let due = sign(json!({"nbf": now - 1, "exp": now + 1200}));
        assert!(decode_verify(&due, &options(None)).is_ok());
    }
}
