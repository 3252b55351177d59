"""Opens the version-2 envelope test vector of docs/agent.md with Python's `cryptography`,
following that page's description alone: an implementation independent of the Rust one. `.ci/run` runs it
(`cryptography`, which it installs); exit status 0 means the page, the vector and the code agree."""

import base64
import hashlib
import hmac
import pathlib
import re
import struct
import sys

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

readme = pathlib.Path(__file__).resolve().parent.parent.joinpath("docs", "agent.md").read_text()
block = readme.split("**Version-2 test vector.**", 1)[1].split("```text", 1)[1].split("```", 1)[0]
v = {k.strip(): val.strip() for k, val in (line.split("=", 1) for line in block.strip().splitlines())}


def private(name):
    byte = int(re.match(r"([0-9a-f]{2}) × 32 bytes", v[name]).group(1), 16)
    return ec.derive_private_key(int.from_bytes(bytes([byte]) * 32, "big"), ec.SECP256R1())


def field(text):
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


b64 = base64.b64decode
d = private("device private key d")
ca = private("CA private key").public_key()
D = d.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
assert base64.b64encode(D).decode() == v["D"], "D"
request_id, counter, serial = v["requestId"], v["encCounter"], v["loginCertSerialNumber"]
expiry = int(v["loginCertExpiryDate"])
E, ct, iv = b64(v["issuerKeyAgreementPublicKey"]), b64(v["loginCert"]), bytes.fromhex(v["IV (hex)"])
assert base64.b64encode(iv).decode() == v["ivLoginCert"], "IV"

# 1. The issuer's signature over E ‖ D ‖ requestId ‖ SHA-256(ciphertext ‖ tag).
sig = b64(v["loginCertSignature"])
der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
ca.verify(der, E + D + request_id.encode() + hashlib.sha256(ct).digest(), ec.ECDSA(hashes.SHA256()))
# 2. Z and the keys.
z = d.exchange(ec.ECDH(), ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), E))
okm = HKDF(hashes.SHA256(), 64, request_id.encode(), b"rp-login-cert-v2\x00" + counter.encode()).derive(z)
k_enc, k_mac = okm[:32], okm[32:]
# 3. Both HMACs.
mac = lambda *parts: hmac.new(k_mac, b"".join(parts), hashlib.sha256).digest()
assert hmac.compare_digest(mac(b"issuerKey\x00", E, D), b64(v["issuerKeyAgreementPublicKeyAuth"])), "key auth"
assert hmac.compare_digest(mac(b"loginCert\x00", iv, ct), b64(v["loginCertAuth"])), "cert auth"
# 4. The AEAD under A.
aad = b"rp-login-cert-v2\x00" + field(request_id) + field(serial) + struct.pack(">q", expiry) + field(counter)
assert aad.hex() == v["A (hex)"], "A"
plain = AESGCM(k_enc).decrypt(iv, ct, aad)
expected = v["plaintext"].strip('"').encode().decode("unicode_escape").encode()
assert plain == expected, plain
print(f"envelope v2 test vector: opened independently ({len(plain)} bytes of plaintext)")
sys.exit(0)
