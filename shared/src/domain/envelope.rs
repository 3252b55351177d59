//! The login-certificate envelope between the enrollment agent and the requesting device. Only the
//! device, holding the private half of `deviceKeyAgreementPublicKey`, can open it.
//!
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
//! All base64 is standard with padding.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use p256::ecdh::{diffie_hellman, EphemeralSecret};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::{PublicKey, SecretKey};
use rand::RngCore;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The envelope's fields, base64 as posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginCertEnvelope {
    pub login_cert: String,
    pub iv_login_cert: String,
    pub login_cert_auth: String,
    pub issuer_key_agreement_public_key: String,
    pub issuer_key_agreement_public_key_auth: String,
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
}

fn keys(shared_x: &[u8], request_id: &str, enc_counter: &str) -> ([u8; 32], [u8; 32]) {
    let hk = Hkdf::<Sha256>::new(Some(request_id.as_bytes()), shared_x);
    let mut info = b"rp-login-cert-v1\0".to_vec();
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

/// Seals `plaintext` for the device whose key-agreement key is `device_key_b64` (agent side).
pub fn seal(
    device_key_b64: &str,
    request_id: &str,
    enc_counter: &str,
    plaintext: &[u8],
) -> Result<LoginCertEnvelope, EnvelopeError> {
    let device_bytes = STANDARD.decode(device_key_b64).map_err(|_| EnvelopeError::BadKey)?;
    let device = PublicKey::from_sec1_bytes(&device_bytes).map_err(|_| EnvelopeError::BadKey)?;
    let ephemeral = EphemeralSecret::random(&mut rand::rngs::OsRng);
    let issuer = ephemeral.public_key();
    let shared = ephemeral.diffie_hellman(&device);
    let (k_enc, k_mac) = keys(shared.raw_secret_bytes(), request_id, enc_counter);
    let mut iv = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut iv);
    let cipher = Aes256Gcm::new_from_slice(&k_enc).expect("a 32-byte key");
    let sealed = cipher
        .encrypt(Nonce::from_slice(&iv), Payload { msg: plaintext, aad: request_id.as_bytes() })
        .map_err(|_| EnvelopeError::Decrypt)?;
    let cert_auth = hmac(&k_mac, b"loginCert", &[&iv, &sealed]).finalize().into_bytes();
    let (issuer_sec1, device_sec1) = (sec1(&issuer), sec1(&device));
    let key_auth = hmac(&k_mac, b"issuerKey", &[&issuer_sec1, &device_sec1]).finalize().into_bytes();
    Ok(LoginCertEnvelope {
        login_cert: STANDARD.encode(&sealed),
        iv_login_cert: STANDARD.encode(iv),
        login_cert_auth: STANDARD.encode(cert_auth),
        issuer_key_agreement_public_key: STANDARD.encode(&issuer_sec1),
        issuer_key_agreement_public_key_auth: STANDARD.encode(key_auth),
    })
}

/// Opens an envelope with the device's key-agreement private key (device side): both
/// authentication values are checked (in constant time) before anything is decrypted.
pub fn open(
    device_secret: &SecretKey,
    envelope: &LoginCertEnvelope,
    request_id: &str,
    enc_counter: &str,
) -> Result<Vec<u8>, EnvelopeError> {
    let decode = |text: &str| STANDARD.decode(text).map_err(|_| EnvelopeError::Encoding);
    let issuer_sec1 = decode(&envelope.issuer_key_agreement_public_key)?;
    let issuer = PublicKey::from_sec1_bytes(&issuer_sec1).map_err(|_| EnvelopeError::BadKey)?;
    let shared = diffie_hellman(device_secret.to_nonzero_scalar(), issuer.as_affine());
    let (k_enc, k_mac) = keys(shared.raw_secret_bytes(), request_id, enc_counter);
    let device_sec1 = sec1(&device_secret.public_key());
    hmac(&k_mac, b"issuerKey", &[&sec1(&issuer), &device_sec1])
        .verify_slice(&decode(&envelope.issuer_key_agreement_public_key_auth)?)
        .map_err(|_| EnvelopeError::Auth)?;
    let iv = decode(&envelope.iv_login_cert)?;
    if iv.len() != 12 {
        return Err(EnvelopeError::Encoding);
    }
    let sealed = decode(&envelope.login_cert)?;
    hmac(&k_mac, b"loginCert", &[&iv, &sealed])
        .verify_slice(&decode(&envelope.login_cert_auth)?)
        .map_err(|_| EnvelopeError::Auth)?;
    let cipher = Aes256Gcm::new_from_slice(&k_enc).expect("a 32-byte key");
    cipher
        .decrypt(Nonce::from_slice(&iv), Payload { msg: &sealed, aad: request_id.as_bytes() })
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

    #[test]
    fn only_the_device_opens_it_and_every_field_is_bound() {
        let (secret, public) = device();
        let env = seal(&public, "req-1", "3", b"-----BEGIN CERTIFICATE-----").unwrap();
        assert_eq!(open(&secret, &env, "req-1", "3").unwrap(), b"-----BEGIN CERTIFICATE-----");
        let (other, _) = device();
        assert_eq!(open(&other, &env, "req-1", "3"), Err(EnvelopeError::Auth));
        assert_eq!(open(&secret, &env, "req-2", "3"), Err(EnvelopeError::Auth), "bound to the request");
        assert_eq!(open(&secret, &env, "req-1", "4"), Err(EnvelopeError::Auth), "bound to the counter");
        let mut tampered = env.clone();
        let mut bytes = STANDARD.decode(&tampered.login_cert).unwrap();
        bytes[0] ^= 1;
        tampered.login_cert = STANDARD.encode(bytes);
        assert_eq!(open(&secret, &tampered, "req-1", "3"), Err(EnvelopeError::Auth));
        let (_, swapped) = device();
        let mut swapped_env = env.clone();
        swapped_env.issuer_key_agreement_public_key = swapped;
        assert_eq!(open(&secret, &swapped_env, "req-1", "3"), Err(EnvelopeError::Auth));
        assert_eq!(seal("bm90IGEga2V5", "r", "1", b"x"), Err(EnvelopeError::BadKey));
    }
}
