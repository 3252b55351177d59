//! The login-certificate envelope between the enrollment agent and the requesting device. Only the
//! device, holding the private half of `deviceKeyAgreementPublicKey`, can open it. Two versions
//! (`envelopeVersion`): the agent writes `2`, the device reads both.
//!
//! Version 1:
//! 1. The agent makes an ephemeral P-256 key `E` and computes `Z`, the x-coordinate of ECDH(E, D)
//!    with the device's key-agreement key `D` (32 bytes).
//! 2. HKDF-SHA256 with salt = UTF-8 `requestId`, IKM = `Z`, info = `"rp-login-cert-v1" 0x00`
//!    UTF-8 `encCounter`, 64 bytes out: `K_enc` (first 32), `K_mac` (last 32).
//! 3. The plaintext (the certificate PEM followed by its private key's PKCS#8 PEM) is sealed with
//!    AES-256-GCM under `K_enc`, a random 96-bit IV and associated data = UTF-8 `requestId`.
//!    `loginCert` = base64(ciphertext ‖ tag), `ivLoginCert` = base64(IV).
//! 4. `loginCertAuth` = base64(HMAC-SHA256(K_mac, `"loginCert" 0x00` ‖ IV ‖ ciphertext ‖ tag)).
//! 5. `issuerKeyAgreementPublicKey` = base64(SEC1 uncompressed `E`, 65 bytes);
//!    `issuerKeyAgreementPublicKeyAuth` = base64(HMAC-SHA256(K_mac, `"issuerKey" 0x00` ‖ `E` ‖ `D`)),
//!    both keys SEC1 uncompressed.
//!
//! Version 2 also authenticates what the device relies on besides the certificate, and the issuer:
//! 1. As in version 1.
//! 2. As in version 1, with info = `"rp-login-cert-v2" 0x00` UTF-8 `encCounter`.
//! 3. As in version 1, with associated data `A` = `"rp-login-cert-v2" 0x00` ‖ field(`requestId`)
//!    ‖ field(`loginCertSerialNumber`) ‖ `loginCertExpiryDate` (epoch ms, 8 bytes big-endian,
//!    two's complement) ‖ field(`encCounter`), where field(x) = the length of UTF-8 x (2 bytes
//!    big-endian) ‖ UTF-8 x.
//! 4. and 5. As in version 1 (under the version-2 `K_mac`).
//! 6. `loginCertSignature` = base64(r ‖ s, 32 bytes each) of ECDSA P-256 with SHA-256, by the
//!    key of `signingCert` (the agent's CA), over `E` ‖ `D` ‖ UTF-8 `requestId` ‖
//!    SHA-256(ciphertext ‖ tag). The device checks it against the public key of `signingCert`
//!    before anything else: a relay that swapped the certificate, serial, expiry or issuer key
//!    fails here or in the AEAD.
//!
//! All base64 is standard with padding.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use p256::ecdh::diffie_hellman;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::{PublicKey, SecretKey};
use rand::RngCore;
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// The envelope's fields, base64 as posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginCertEnvelope {
    /// 1 or 2.
    pub version: u8,
    pub login_cert: String,
    pub iv_login_cert: String,
    pub login_cert_auth: String,
    pub issuer_key_agreement_public_key: String,
    pub issuer_key_agreement_public_key_auth: String,
    /// Version 2 only.
    pub login_cert_signature: Option<String>,
}

/// What an envelope is bound to besides the device's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding<'a> {
    pub request_id: &'a str,
    pub enc_counter: &'a str,
    /// Version 2 only.
    pub serial: &'a str,
    /// Version 2 only.
    pub expiry_ms: i64,
}

const V1_LABEL: &[u8] = b"rp-login-cert-v1";
const V2_LABEL: &[u8] = b"rp-login-cert-v2";

impl Binding<'_> {
    /// Version 2's associated data.
    fn associated_data(&self) -> Vec<u8> {
        let mut aad = V2_LABEL.to_vec();
        aad.push(0);
        field(&mut aad, self.request_id);
        field(&mut aad, self.serial);
        aad.extend_from_slice(&self.expiry_ms.to_be_bytes());
        field(&mut aad, self.enc_counter);
        aad
    }
}

fn field(out: &mut Vec<u8>, text: &str) {
    let len = u16::try_from(text.len()).expect("envelope fields are validated far below 64 KiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(text.as_bytes());
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvelopeError {
    #[error("the key-agreement public key is not a P-256 point")]
    BadKey,
    #[error("a field is not valid base64 of the right length")]
    Encoding,
    #[error("an authentication value does not match")]
    Auth,
    #[error("the certificate does not decrypt")]
    Decrypt,
    #[error("the issuer's signature does not verify against signingCert")]
    Signature,
    #[error("unknown envelope version {0}")]
    Version(u8),
}

fn keys(label: &[u8], shared_x: &[u8], request_id: &str, enc_counter: &str) -> ([u8; 32], [u8; 32]) {
    let hk = Hkdf::<Sha256>::new(Some(request_id.as_bytes()), shared_x);
    let mut info = label.to_vec();
    info.push(0);
    info.extend_from_slice(enc_counter.as_bytes());
    let mut okm = [0u8; 64];
    hk.expand(&info, &mut okm).expect("64 bytes is a valid HKDF-SHA256 length");
    let mut enc = [0u8; 32];
    let mut mac = [0u8; 32];
    enc.copy_from_slice(&okm[..32]);
    mac.copy_from_slice(&okm[32..]);
    (enc, mac)
}

fn hmac(key: &[u8; 32], label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(label);
    mac.update(&[0]);
    for part in parts {
        mac.update(part);
    }
    mac
}

fn sec1(key: &PublicKey) -> Vec<u8> {
    key.to_encoded_point(false).as_bytes().to_vec()
}

/// Seals `plaintext` for the device whose key-agreement key is `device_key_b64` (agent side),
/// version 2, signed with the agent's CA key `issuer`.
pub fn seal(
    device_key_b64: &str,
    binding: &Binding<'_>,
    plaintext: &[u8],
    issuer: &SigningKey,
) -> Result<LoginCertEnvelope, EnvelopeError> {
    let ephemeral = SecretKey::random(&mut rand::rngs::OsRng);
    let mut iv = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut iv);
    seal_with(2, device_key_b64, binding, plaintext, Some(issuer), &ephemeral, iv)
}

/// Seals as version 1 (no signature; serial and expiry unbound): what older agents post.
pub fn seal_v1(
    device_key_b64: &str,
    request_id: &str,
    enc_counter: &str,
    plaintext: &[u8],
) -> Result<LoginCertEnvelope, EnvelopeError> {
    let ephemeral = SecretKey::random(&mut rand::rngs::OsRng);
    let mut iv = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut iv);
    let binding = Binding { request_id, enc_counter, serial: "", expiry_ms: 0 };
    seal_with(1, device_key_b64, &binding, plaintext, None, &ephemeral, iv)
}

/// Sealing with the ephemeral key and IV given: the test vectors fix both.
fn seal_with(
    version: u8,
    device_key_b64: &str,
    binding: &Binding<'_>,
    plaintext: &[u8],
    issuer: Option<&SigningKey>,
    ephemeral: &SecretKey,
    iv: [u8; 12],
) -> Result<LoginCertEnvelope, EnvelopeError> {
    let device_bytes = STANDARD.decode(device_key_b64).map_err(|_| EnvelopeError::BadKey)?;
    let device = PublicKey::from_sec1_bytes(&device_bytes).map_err(|_| EnvelopeError::BadKey)?;
    let issuer_key = ephemeral.public_key();
    let shared = diffie_hellman(ephemeral.to_nonzero_scalar(), device.as_affine());
    let (label, aad) = match version {
        1 => (V1_LABEL, binding.request_id.as_bytes().to_vec()),
        _ => (V2_LABEL, binding.associated_data()),
    };
    let (k_enc, k_mac) = keys(label, shared.raw_secret_bytes(), binding.request_id, binding.enc_counter);
    let cipher = Aes256Gcm::new_from_slice(&k_enc).expect("a 32-byte key");
    let sealed = cipher
        .encrypt(Nonce::from_slice(&iv), Payload { msg: plaintext, aad: &aad })
        .map_err(|_| EnvelopeError::Decrypt)?;
    let cert_auth = hmac(&k_mac, b"loginCert", &[&iv, &sealed]).finalize().into_bytes();
    let (issuer_sec1, device_sec1) = (sec1(&issuer_key), sec1(&device));
    let key_auth = hmac(&k_mac, b"issuerKey", &[&issuer_sec1, &device_sec1]).finalize().into_bytes();
    let signature = match (version, issuer) {
        (1, _) => None,
        (_, Some(issuer)) => {
            let message = signed_message(&issuer_sec1, &device_sec1, binding.request_id, &sealed);
            let signature: Signature = issuer.sign(&message);
            Some(STANDARD.encode(signature.to_bytes()))
        }
        (_, None) => return Err(EnvelopeError::Signature),
    };
    Ok(LoginCertEnvelope {
        version,
        login_cert: STANDARD.encode(&sealed),
        iv_login_cert: STANDARD.encode(iv),
        login_cert_auth: STANDARD.encode(cert_auth),
        issuer_key_agreement_public_key: STANDARD.encode(&issuer_sec1),
        issuer_key_agreement_public_key_auth: STANDARD.encode(key_auth),
        login_cert_signature: signature,
    })
}

/// What version 2's signature covers: `E` ‖ `D` ‖ `requestId` ‖ SHA-256(ciphertext ‖ tag).
fn signed_message(issuer_sec1: &[u8], device_sec1: &[u8], request_id: &str, sealed: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(65 + 65 + request_id.len() + 32);
    message.extend_from_slice(issuer_sec1);
    message.extend_from_slice(device_sec1);
    message.extend_from_slice(request_id.as_bytes());
    message.extend_from_slice(&Sha256::digest(sealed));
    message
}

/// Opens an envelope with the device's key-agreement private key (device side). Version 2's
/// signature is checked against `issuer` (the public key of `signingCert`) first; both
/// authentication values are checked (in constant time) before anything is decrypted.
pub fn open(
    device_secret: &SecretKey,
    envelope: &LoginCertEnvelope,
    binding: &Binding<'_>,
    issuer: &VerifyingKey,
) -> Result<Vec<u8>, EnvelopeError> {
    let decode = |text: &str| STANDARD.decode(text).map_err(|_| EnvelopeError::Encoding);
    let (label, aad) = match envelope.version {
        1 => (V1_LABEL, binding.request_id.as_bytes().to_vec()),
        2 => (V2_LABEL, binding.associated_data()),
        other => return Err(EnvelopeError::Version(other)),
    };
    let issuer_sec1 = decode(&envelope.issuer_key_agreement_public_key)?;
    let issuer_key = PublicKey::from_sec1_bytes(&issuer_sec1).map_err(|_| EnvelopeError::BadKey)?;
    let device_sec1 = sec1(&device_secret.public_key());
    let sealed = decode(&envelope.login_cert)?;
    if envelope.version == 2 {
        let signature = envelope.login_cert_signature.as_deref().ok_or(EnvelopeError::Signature)?;
        let signature = Signature::from_slice(&decode(signature)?).map_err(|_| EnvelopeError::Signature)?;
        let message = signed_message(&sec1(&issuer_key), &device_sec1, binding.request_id, &sealed);
        issuer.verify(&message, &signature).map_err(|_| EnvelopeError::Signature)?;
    }
    let shared = diffie_hellman(device_secret.to_nonzero_scalar(), issuer_key.as_affine());
    let (k_enc, k_mac) = keys(label, shared.raw_secret_bytes(), binding.request_id, binding.enc_counter);
    hmac(&k_mac, b"issuerKey", &[&sec1(&issuer_key), &device_sec1])
        .verify_slice(&decode(&envelope.issuer_key_agreement_public_key_auth)?)
        .map_err(|_| EnvelopeError::Auth)?;
    let iv = decode(&envelope.iv_login_cert)?;
    if iv.len() != 12 {
        return Err(EnvelopeError::Encoding);
    }
    hmac(&k_mac, b"loginCert", &[&iv, &sealed])
        .verify_slice(&decode(&envelope.login_cert_auth)?)
        .map_err(|_| EnvelopeError::Auth)?;
    let cipher = Aes256Gcm::new_from_slice(&k_enc).expect("a 32-byte key");
    cipher
        .decrypt(Nonce::from_slice(&iv), Payload { msg: &sealed, aad: &aad })
        .map_err(|_| EnvelopeError::Decrypt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> (SecretKey, String) {
        let secret = SecretKey::random(&mut rand::rngs::OsRng);
        let public = STANDARD.encode(sec1(&secret.public_key()));
        (secret, public)
    }

    fn issuer() -> SigningKey {
        SigningKey::random(&mut rand::rngs::OsRng)
    }

    const B: Binding<'static> =
        Binding { request_id: "req-1", enc_counter: "3", serial: "0a1b", expiry_ms: 1_893_456_000_000 };

    #[test]
    fn only_the_device_opens_it_and_every_field_is_bound() {
        let (secret, public) = device();
        let ca = issuer();
        let ca_public = *ca.verifying_key();
        let env = seal(&public, &B, b"-----BEGIN CERTIFICATE-----", &ca).unwrap();
        assert_eq!(env.version, 2);
        assert_eq!(open(&secret, &env, &B, &ca_public).unwrap(), b"-----BEGIN CERTIFICATE-----");
        let (other, _) = device();
        assert_eq!(open(&other, &env, &B, &ca_public), Err(EnvelopeError::Signature), "signed for D");
        let bound = [
            Binding { request_id: "req-2", ..B },
            Binding { enc_counter: "4", ..B },
            Binding { serial: "0a1c", ..B },
            Binding { expiry_ms: B.expiry_ms + 1, ..B },
        ];
        for binding in bound {
            assert!(open(&secret, &env, &binding, &ca_public).is_err(), "bound to {binding:?}");
        }
        let mut tampered = env.clone();
        let mut bytes = STANDARD.decode(&tampered.login_cert).unwrap();
        bytes[0] ^= 1;
        tampered.login_cert = STANDARD.encode(bytes);
        assert_eq!(open(&secret, &tampered, &B, &ca_public), Err(EnvelopeError::Signature));
        let (_, swapped) = device();
        let mut swapped_env = env.clone();
        swapped_env.issuer_key_agreement_public_key = swapped;
        assert_eq!(open(&secret, &swapped_env, &B, &ca_public), Err(EnvelopeError::Signature));
        let other_ca = *issuer().verifying_key();
        assert_eq!(open(&secret, &env, &B, &other_ca), Err(EnvelopeError::Signature), "another issuer");
        let unsigned = LoginCertEnvelope { login_cert_signature: None, ..env.clone() };
        assert_eq!(open(&secret, &unsigned, &B, &ca_public), Err(EnvelopeError::Signature));
        let downgraded = LoginCertEnvelope { version: 1, ..env.clone() };
        assert!(open(&secret, &downgraded, &B, &ca_public).is_err(), "a v2 envelope is no v1 one");
        assert_eq!(
            open(&secret, &LoginCertEnvelope { version: 3, ..env }, &B, &ca_public),
            Err(EnvelopeError::Version(3))
        );
        assert_eq!(seal("bm90IGEga2V5", &B, b"x", &ca), Err(EnvelopeError::BadKey));
    }

    #[test]
    fn version_1_is_still_read() {
        let (secret, public) = device();
        let ca_public = *issuer().verifying_key();
        let env = seal_v1(&public, "req-1", "3", b"pem").unwrap();
        assert_eq!((env.version, &env.login_cert_signature), (1, &None));
        // Version 1 binds neither serial nor expiry, and has no signature to check.
        let loose = Binding { serial: "any", expiry_ms: 1, ..B };
        assert_eq!(open(&secret, &env, &loose, &ca_public).unwrap(), b"pem");
        assert_eq!(
            open(&secret, &env, &Binding { enc_counter: "4", ..B }, &ca_public),
            Err(EnvelopeError::Auth)
        );
    }

    fn scalar(byte: u8) -> SecretKey {
        SecretKey::from_slice(&[byte; 32]).unwrap()
    }

    /// The test vector of docs/agent.md, byte for byte: fixed device, ephemeral and CA keys, fixed IV.
    #[test]
    fn the_readme_test_vector() {
        let device = scalar(0x11);
        let device_public = STANDARD.encode(sec1(&device.public_key()));
        let ca = SigningKey::from(scalar(0x33));
        let binding = Binding {
            request_id: "8c1e4e0a-5d8b-4a43-9a57-3c1b1c2f7d10",
            enc_counter: "7",
            serial: "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
            expiry_ms: 1_893_456_000_000,
        };
        let iv: [u8; 12] = core::array::from_fn(|i| i as u8);
        let plaintext = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let env = seal_with(2, &device_public, &binding, plaintext, Some(&ca), &scalar(0x22), iv).unwrap();
        assert_eq!(
            hex::encode(binding.associated_data()),
            concat!(
                "72702d6c6f67696e2d636572742d763200", // "rp-login-cert-v2" 0x00
                "0024",
                "38633165346530612d356438622d346134332d396135372d336331623163326637643130", // requestId
                "0020",
                "3061316232633364346535663630373138323933613462356336643765386639", // serial
                "000001b8dac5b400",                                                 // expiry, ms
                "0001",
                "37", // encCounter
            )
        );
        let expected = LoginCertEnvelope {
            version: 2,
            login_cert: "IOF+24Q+fh+1xqUJfNLldlSQHIDvGrcZEZpEt2N0Trb2nSLSYOZ8j8X8iCR5UWZhXx4QZyYTLSEgUahSDTWNAYYnOW9IlH+EykVU".into(),
            iv_login_cert: "AAECAwQFBgcICQoL".into(),
            login_cert_auth: "AtFbXhQEGYInGvcPBWaMoqJywlHLug8CcmMZ6mw5GlE=".into(),
            issuer_key_agreement_public_key: "BNZak5d8qj0bCBhS/1ennkZfFmBXcwS66tUF3TpIWJzzUBheiVNy32Ih6joTdVfkc/3bZ1XwW9UHw8Uz/OnJEoU=".into(),
            issuer_key_agreement_public_key_auth: "h01fUrE3KIgbDX8H/PgCa+bCzjI3AeF3k90Qx7rCF4U=".into(),
            login_cert_signature: Some("Jt1AkMK9fNexfmeAhnfLzzCXNUGxEBgr5xWbn6NQB3/oyMvMjDQco0cXOht3DGmV3vvcuzDeA5U/Nx62qBvGRw==".into()),
        };
        assert_eq!(env, expected);
        assert_eq!(open(&device, &expected, &binding, ca.verifying_key()).unwrap(), plaintext);
    }
}
