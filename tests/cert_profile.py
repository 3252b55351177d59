"""Checks a login certificate against the profile Windows certificate logon needs, with an
independent parser (Python's `cryptography`), field by field.

    pip install 'cryptography>=42'
    python3 tests/cert_profile.py CERT.pem CA.pem UPN CRL_URL CA_ISSUERS_URL VALIDITY_DAYS [SID]

`shared/tests/agent_profile.rs` issues a certificate with the reference agent's CA and runs this
on it (it skips, saying so, where `cryptography` is not installed; `.ci/run` installs it). Exit
status 0 when every field is as the profile says."""

import datetime
import hashlib
import sys

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID, ExtensionOID

SMART_CARD_LOGON = x509.ObjectIdentifier("1.3.6.1.4.1.311.20.2.2")
UPN = x509.ObjectIdentifier("1.3.6.1.4.1.311.20.2.3")
SID_EXTENSION = x509.ObjectIdentifier("1.3.6.1.4.1.311.25.2")  # szOID_NTDS_CA_SECURITY_EXT

cert_path, ca_path, upn, crl_url, ca_issuers_url, validity_days = sys.argv[1:7]
sid = sys.argv[7] if len(sys.argv) > 7 else ""
cert = x509.load_pem_x509_certificate(open(cert_path, "rb").read())
ca = x509.load_pem_x509_certificate(open(ca_path, "rb").read())
problems = []


def check(what, ok, seen):
    if not ok:
        problems.append(f"{what}: {seen}")
    else:
        print(f"ok   {what}")


ext = lambda oid: cert.extensions.get_extension_for_oid(oid).value  # noqa: E731

eku = ext(ExtensionOID.EXTENDED_KEY_USAGE)
check("EKU Client Authentication", ExtendedKeyUsageOID.CLIENT_AUTH in eku, list(eku))
check("EKU Smart Card Logon (1.3.6.1.4.1.311.20.2.2)", SMART_CARD_LOGON in eku, list(eku))

san = ext(ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
others = [n for n in san.get_values_for_type(x509.OtherName) if n.type_id == UPN]
encoded = upn.encode()
utf8 = bytes([0x0C, len(encoded)]) + encoded  # DER UTF8String (short form: the UPNs here are < 128 bytes)
check("SAN otherName UPN (1.3.6.1.4.1.311.20.2.3) as a UTF8String", [o.value for o in others] == [utf8],
      [o.value for o in others])
check("SAN rfc822Name", san.get_values_for_type(x509.RFC822Name) == ([upn] if "@" in upn else []),
      san.get_values_for_type(x509.RFC822Name))

ku = ext(ExtensionOID.KEY_USAGE)
check("key usage digitalSignature", ku.digital_signature, ku)
check("no keyEncipherment for a P-256 key", not ku.key_encipherment and isinstance(cert.public_key(), ec.EllipticCurvePublicKey), ku)

cdp = ext(ExtensionOID.CRL_DISTRIBUTION_POINTS)
uris = [n.value for point in cdp for n in (point.full_name or [])]
check("CRL distribution point", uris == [crl_url], uris)

aia = ext(ExtensionOID.AUTHORITY_INFORMATION_ACCESS)
issuers = [d.access_location.value for d in aia if d.access_method == AuthorityInformationAccessOID.CA_ISSUERS]
check("AIA caIssuers", issuers == [ca_issuers_url], issuers)

lived = cert.not_valid_after_utc - cert.not_valid_before_utc
want = datetime.timedelta(days=int(validity_days), minutes=5)
check(f"validity {validity_days} days (from 5 minutes back)", abs(lived - want) < datetime.timedelta(seconds=5), lived)



def der(tag, content):
    """One DER element (short or long form length)."""
    size = len(content)
    length = bytes([size]) if size < 128 else bytes([0x80 | ((size.bit_length() + 7) // 8)]) + size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + content


sids = [e for e in cert.extensions if e.oid == SID_EXTENSION]
if sid:
    # KB5014754's strong mapping: GeneralNames { otherName { 1.3.6.1.4.1.311.25.2.1, [0] OCTET STRING "S-1-…" } }.
    object_sid = bytes.fromhex("060a2b060104018237190201")
    want = der(0x30, der(0xA0, object_sid + der(0xA0, der(0x04, sid.encode()))))
    seen = [(e.critical, e.value.value) for e in sids]
    check("SID extension (1.3.6.1.4.1.311.25.2) naming the user's SID, not critical", seen == [(False, want)], seen)
else:
    check("no SID extension without a SID", sids == [], sids)
check("subject CN is the UPN", cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == upn, cert.subject)
check("issued by the CA", cert.issuer == ca.subject, cert.issuer)
try:
    cert.verify_directly_issued_by(ca)
    check("signed by the CA's key", True, "")
except Exception as e:  # noqa: BLE001
    check("signed by the CA's key", False, e)

def extension(certificate, oid):
    """The certificate's extension `oid`, or None."""
    found = [e for e in certificate.extensions if e.oid == oid]
    return found[0] if found else None


basic = extension(cert, ExtensionOID.BASIC_CONSTRAINTS)
check("basic constraints cA FALSE, critical, no path length",
      basic is not None and basic.critical and not basic.value.ca and basic.value.path_length is None, basic)
# The leftmost 160 bits of the SHA-256 of the key's DER SubjectPublicKeyInfo (RFC 5280 4.2.1.2
# takes any method that names the key uniquely; RFC 7093 lists this one's kin).
spki = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
ski = extension(cert, ExtensionOID.SUBJECT_KEY_IDENTIFIER)
check("subject key identifier of the certificate's key (SHA-256, 160 bits), not critical",
      ski is not None and not ski.critical and ski.value.digest == hashlib.sha256(spki).digest()[:20], ski)
aki = extension(cert, ExtensionOID.AUTHORITY_KEY_IDENTIFIER)
ca_ski = extension(ca, ExtensionOID.SUBJECT_KEY_IDENTIFIER)
check("authority key identifier is the CA's subject key identifier, not critical",
      aki is not None and ca_ski is not None and not aki.critical
      and aki.value.key_identifier == ca_ski.value.digest, (aki, ca_ski))

if problems:
    print("FAIL " + "\nFAIL ".join(problems))
    sys.exit(1)
print("the login certificate has the Windows logon profile")
