//! The enrollment agent's CA as verifiers see it: its certificate and its latest CRL, published
//! under `/rp/pki/<CA id>/`. What an upload must be to replace the published CRL is decided
//! here: the CA id must be the certificate's, the CRL must be that CA's and signed by it, and its
//! number must be above the published one's.

use crate::time::EpochMillis;
use crate::validate::FieldError;
use sha2::{Digest, Sha256};
use std::cmp::Ordering;
use x509_cert::crl::CertificateList;
use x509_cert::der::{Decode, Encode};
use x509_cert::ext::pkix::CrlNumber;
use x509_cert::Certificate;

/// ecdsa-with-SHA256, the agent's CA's signature algorithm.
const ECDSA_WITH_SHA256: x509_cert::der::asn1::ObjectIdentifier =
    x509_cert::der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("caId: nothing is published for CA {0}")]
    NotFound(String),
    #[error("crl: its number {sent} is below the published CRL's {published}; nothing is written")]
    Outdated { sent: String, published: String },
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(PkiError);

/// A CA's id: the first 16 hex digits of the SHA-256 of its certificate (DER).
pub fn ca_id(certificate_der: &[u8]) -> String {
    hex::encode(&Sha256::digest(certificate_der)[..8])
}

/// A `{caId}` as a path names it: 16 lowercase hex digits.
pub fn check_ca_id(value: &str) -> Result<&str, FieldError> {
    if value.len() != 16 || !value.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(FieldError::new("caId", "must be a CA id: 16 lowercase hex digits"));
    }
    Ok(value)
}

/// A CRL checked against its CA: what is published, and what decides which CRL is newer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedCrl {
    pub ca_id: String,
    pub ca_certificate: Vec<u8>,
    pub crl: Vec<u8>,
    /// The CRL number, big-endian without leading zeros.
    pub number: Vec<u8>,
    pub this_update: EpochMillis,
    pub next_update: Option<EpochMillis>,
}

impl PublishedCrl {
    /// Seconds a cache may keep the CRL at `now`: until its `nextUpdate`, at most an hour (so a
    /// revocation published sooner reaches verifiers within the hour); none without one or past
    /// it.
    pub fn cache_secs(&self, now: EpochMillis) -> i64 {
        self.next_update.map_or(0, |next| ((next.0 - now.0) / 1000).clamp(0, 3600))
    }

    /// The CRL number as lowercase hex.
    pub fn number_hex(&self) -> String {
        if self.number.is_empty() {
            "0".into()
        } else {
            hex::encode(&self.number)
        }
    }
}

/// The largest CRL published (DER): about 75,000 revoked serials. The store keeps it in parts,
/// all written in one transaction, which takes 4 MB at most (DynamoDB's).
pub const MAX_CRL_BYTES: usize = 2_800_000;

/// The largest CA certificate (DER).
pub const MAX_CA_CERTIFICATE_BYTES: usize = 16_384;

fn invalid(field: &str, message: impl Into<String>) -> FieldError {
    FieldError::new(field, message)
}

/// Checks an upload for CA `ca_id`: the certificate parses and is that CA's; the CRL parses,
/// names that CA as its issuer, carries a CRL number, and its ECDSA P-256 signature verifies
/// under the CA's key.
pub fn check_upload(
    ca_id_in_path: &str,
    ca_certificate: Vec<u8>,
    crl: Vec<u8>,
) -> Result<PublishedCrl, FieldError> {
    use p256::ecdsa::signature::Verifier as _;
    if ca_certificate.len() > MAX_CA_CERTIFICATE_BYTES {
        return Err(invalid(
            "caCertificate",
            format!("must be at most {MAX_CA_CERTIFICATE_BYTES} bytes (DER)"),
        ));
    }
    if crl.len() > MAX_CRL_BYTES {
        return Err(invalid(
            "crl",
            format!("must be at most {MAX_CRL_BYTES} bytes (DER), about 75,000 serials"),
        ));
    }
    let ca = Certificate::from_der(&ca_certificate)
        .map_err(|e| invalid("caCertificate", format!("is not a DER certificate: {e}")))?;
    if ca_id(&ca_certificate) != ca_id_in_path {
        return Err(invalid("caCertificate", format!("is not the certificate of CA {ca_id_in_path}")));
    }
    let list =
        CertificateList::from_der(&crl).map_err(|e| invalid("crl", format!("is not a DER CRL: {e}")))?;
    let tbs = &list.tbs_cert_list;
    if tbs.issuer != ca.tbs_certificate.subject {
        return Err(invalid("crl", "is not issued by this CA (its issuer is another name)"));
    }
    if list.signature_algorithm.oid != ECDSA_WITH_SHA256 {
        return Err(invalid("crl", "must be signed with ecdsa-with-SHA256, as the agent's CA signs"));
    }
    let spki = &ca.tbs_certificate.subject_public_key_info.subject_public_key;
    let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(spki.raw_bytes())
        .map_err(|_| invalid("caCertificate", "its key is not a P-256 key"))?;
    let signature = list
        .signature
        .as_bytes()
        .and_then(|bytes| p256::ecdsa::Signature::from_der(bytes).ok())
        .ok_or_else(|| invalid("crl", "its signature is not an ECDSA signature"))?;
    let signed = tbs.to_der().map_err(|e| invalid("crl", e.to_string()))?;
    key.verify(&signed, &signature)
        .map_err(|_| invalid("crl", "its signature does not verify under the CA's key"))?;
    let number = tbs
        .crl_extensions
        .iter()
        .flatten()
        .find(|e| e.extn_id == x509_cert::der::oid::db::rfc5280::ID_CE_CRL_NUMBER)
        .ok_or_else(|| invalid("crl", "has no CRL number"))?;
    let number = CrlNumber::from_der(number.extn_value.as_bytes())
        .map_err(|e| invalid("crl", format!("its CRL number does not parse: {e}")))?;
    let millis = |t: x509_cert::time::Time| EpochMillis(t.to_unix_duration().as_millis() as i64);
    Ok(PublishedCrl {
        ca_id: ca_id_in_path.to_owned(),
        number: number.0.as_bytes().iter().copied().skip_while(|b| *b == 0).collect(),
        this_update: millis(tbs.this_update),
        next_update: tbs.next_update.map(millis),
        ca_certificate,
        crl,
    })
}

/// Whether `sent` may replace `published`: a higher CRL number replaces, the same CRL again is
/// already there, and anything else is older (or a different CRL under a number in use).
pub fn replaces(published: Option<&PublishedCrl>, sent: &PublishedCrl) -> Result<bool, PkiError> {
    let Some(published) = published else { return Ok(true) };
    let order = (sent.number.len(), &sent.number).cmp(&(published.number.len(), &published.number));
    match order {
        Ordering::Greater => Ok(true),
        Ordering::Equal if sent.crl == published.crl && sent.ca_certificate == published.ca_certificate => {
            Ok(false)
        }
        _ => Err(PkiError::Outdated { sent: sent.number_hex(), published: published.number_hex() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, CertificateRevocationListParams, DistinguishedName, DnType,
        IsCa, Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose, SerialNumber, SignatureAlgorithm,
    };

    /// A CA named `name` with a new key of `alg`: its certificate (DER) and its issuer.
    fn ca(name: &str, alg: &'static SignatureAlgorithm) -> (Vec<u8>, Issuer<'static, KeyPair>) {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate_for(alg).unwrap();
        let der = params.self_signed(&key).unwrap().der().to_vec();
        (der, Issuer::new(params, key))
    }

    /// A CRL numbered `number` (big-endian, as sent), valid from 1,000 s to 4,600 s.
    fn crl_by(issuer: &Issuer<'_, KeyPair>, number: &[u8]) -> Vec<u8> {
        let at = |secs| rcgen::date_time_ymd(1970, 1, 1) + std::time::Duration::from_secs(secs);
        let params = CertificateRevocationListParams {
            this_update: at(1_000),
            next_update: at(4_600),
            crl_number: SerialNumber::from(number.to_vec()),
            issuing_distribution_point: None,
            revoked_certs: Vec::new(),
            key_identifier_method: KeyIdMethod::Sha256,
        };
        params.signed_by(issuer).unwrap().der().to_vec()
    }

    #[test]
    fn an_upload_is_its_cas_signed_numbered_crl_and_nothing_else() {
        let p256 = &rcgen::PKCS_ECDSA_P256_SHA256;
        let (cert, issuer) = ca("Agent CA", p256);
        let id = ca_id(&cert);
        let published = check_upload(&id, cert.clone(), crl_by(&issuer, &[0, 0, 0x01, 0x02])).unwrap();
        assert_eq!((published.ca_id.as_str(), published.number_hex()), (id.as_str(), "0102".to_owned()));
        assert_eq!(
            (published.this_update, published.next_update),
            (EpochMillis(1_000_000), Some(EpochMillis(4_600_000)))
        );

        let refused = |cert: Vec<u8>, crl: Vec<u8>| check_upload(&id, cert, crl).unwrap_err();
        let said = |e: FieldError| format!("{}: {}", e.field, e.message);
        let (other_cert, other) = ca("Another CA", p256);
        let (_, same_name) = ca("Agent CA", p256);
        let (_, p384) = ca("Agent CA", &rcgen::PKCS_ECDSA_P384_SHA384);
        let cases = [
            (other_cert.clone(), crl_by(&issuer, &[1]), "caCertificate: is not the certificate of CA"),
            (cert.clone(), crl_by(&other, &[1]), "crl: is not issued by this CA"),
            (cert.clone(), crl_by(&same_name, &[1]), "crl: its signature does not verify"),
            (cert.clone(), crl_by(&p384, &[1]), "crl: must be signed with ecdsa-with-SHA256"),
            (cert.clone(), b"not a CRL".to_vec(), "crl: is not a DER CRL"),
            (b"not a certificate".to_vec(), crl_by(&issuer, &[1]), "caCertificate: is not a DER certificate"),
        ];
        for (cert, crl, told) in cases {
            let said = said(refused(cert, crl));
            assert!(said.starts_with(told), "{said}");
        }
        // The size bounds: at the bound the bytes are read (and are no DER); a byte past, not.
        for (field, bound) in [("caCertificate", MAX_CA_CERTIFICATE_BYTES), ("crl", MAX_CRL_BYTES)] {
            for (len, told) in [(bound, "is not a DER"), (bound + 1, "must be at most")] {
                let bytes = vec![0u8; len];
                let e = match field {
                    "crl" => refused(cert.clone(), bytes),
                    _ => refused(bytes, crl_by(&issuer, &[1])),
                };
                assert!(e.field == field && e.message.starts_with(told), "{len}: {}", said(e));
            }
        }
    }

    #[test]
    fn a_ca_id_is_the_start_of_its_certificates_sha256_in_hex() {
        assert_eq!(ca_id(b""), "e3b0c44298fc1c14");
        assert_eq!(
            (crl(&[], b"a").number_hex(), crl(&[0x0a, 0x01], b"a").number_hex()),
            ("0".into(), "0a01".into())
        );
        assert_eq!(check_ca_id("e3b0c44298fc1c14").unwrap(), "e3b0c44298fc1c14");
        for bad in ["E3B0C44298FC1C14", "e3b0c44298fc1c1", "e3b0c44298fc1c14a", "g3b0c44298fc1c14"] {
            assert_eq!(check_ca_id(bad).unwrap_err().field, "caId", "{bad}");
        }
    }

    fn crl(number: &[u8], bytes: &[u8]) -> PublishedCrl {
        PublishedCrl {
            ca_id: "0123456789abcdef".into(),
            ca_certificate: vec![1],
            crl: bytes.to_vec(),
            number: number.to_vec(),
            this_update: EpochMillis(0),
            next_update: None,
        }
    }

    #[test]
    fn a_higher_number_replaces_the_same_crl_is_kept_and_a_lower_one_is_refused() {
        let published = crl(&[0x01, 0x00], b"a");
        assert!(replaces(None, &published).unwrap());
        assert!(replaces(Some(&published), &crl(&[0x01, 0x01], b"b")).unwrap());
        assert!(replaces(Some(&published), &crl(&[0x01, 0x00, 0x00], b"b")).unwrap(), "longer is larger");
        assert!(!replaces(Some(&published), &crl(&[0x01, 0x00], b"a")).unwrap(), "the same CRL again");
        assert!(matches!(replaces(Some(&published), &crl(&[0xff], b"c")), Err(PkiError::Outdated { .. })));
        assert!(matches!(
            replaces(Some(&published), &crl(&[0x01, 0x00], b"other")),
            Err(PkiError::Outdated { .. })
        ));
    }

    #[test]
    fn a_crl_is_cached_until_its_next_update_an_hour_at_most() {
        let next = |at: Option<i64>| PublishedCrl { next_update: at.map(EpochMillis), ..crl(&[1], b"a") };
        let now = EpochMillis(1_000_000);
        assert_eq!(next(None).cache_secs(now), 0, "no nextUpdate: not cached");
        assert_eq!(next(Some(1_000_000 + 1_800_999)).cache_secs(now), 1_800, "whole seconds left");
        assert_eq!(next(Some(1_000_000 + 7_200_000)).cache_secs(now), 3_600);
        assert_eq!(next(Some(1_000_000 + 3_600_000)).cache_secs(now), 3_600);
        assert_eq!(next(Some(1_000_000)).cache_secs(now), 0);
        assert_eq!(next(Some(1)).cache_secs(now), 0, "past it");
    }

    #[test]
    fn a_ca_id_is_16_lowercase_hex_digits() {
        assert!(check_ca_id("0123456789abcdef").is_ok());
        for bad in ["", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdefa", "0123456789abcdeg"] {
            assert_eq!(check_ca_id(bad).unwrap_err().field, "caId", "{bad}");
        }
    }

    #[test]
    fn garbage_is_refused_naming_the_field() {
        assert_eq!(check_upload("0123456789abcdef", vec![1, 2], vec![3]).unwrap_err().field, "caCertificate");
    }

    #[test]
    fn what_the_store_cannot_keep_is_refused_before_it_is_parsed() {
        let id = "0123456789abcdef";
        let too_long = check_upload(id, vec![0; MAX_CA_CERTIFICATE_BYTES + 1], vec![3]).unwrap_err();
        assert_eq!(
            (too_long.field.as_str(), too_long.message.contains("16384 bytes")),
            ("caCertificate", true)
        );
        let too_long = check_upload(id, vec![1, 2], vec![0; MAX_CRL_BYTES + 1]).unwrap_err();
        assert_eq!((too_long.field.as_str(), too_long.message.contains("2800000 bytes")), ("crl", true));
    }
}
