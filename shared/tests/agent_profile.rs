//! The reference agent's login certificate, parsed by an independent implementation (Python's
//! `cryptography`, `tests/cert_profile.py`): the Windows logon profile field by field. Skipped,
//! saying so, where `python3` with `cryptography` is not at hand (`.ci/run` installs it).

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use rp_shared::agent::{LocalCa, LoginProfile};
use std::process::Command;

fn python_with_cryptography() -> bool {
    Command::new("python3").args(["-c", "import cryptography"]).status().is_ok_and(|s| s.success())
}

#[test]
fn a_login_certificate_has_the_windows_logon_profile() {
    if !python_with_cryptography() {
        eprintln!("skipped: python3 with `cryptography` is not installed (pip install 'cryptography>=42')");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = LocalCa::open_or_create(&dir.path().join("ca")).unwrap();
    let base = "https://rp.example.com";
    let sid: rp_shared::agent::Sid = "S-1-5-21-3623811015-3361044348-30300820-1013".parse().unwrap();
    for (upn, days, sid) in [("alice@corp.example.com", 30, Some(&sid)), ("CORP-bob", 365, None)] {
        let profile = LoginProfile { upn, validity_days: days, public_base_url: base, sid };
        let (bundle, _serial, _expiry) = ca.issue(&profile).unwrap();
        let cert_pem =
            &bundle[..bundle.find("-----END CERTIFICATE-----").unwrap() + "-----END CERTIFICATE-----".len()];
        let cert_path = dir.path().join("cert.pem");
        std::fs::write(&cert_path, cert_pem).unwrap();
        let ca_pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            STANDARD.encode(ca.certificate_der())
        );
        let ca_path = dir.path().join("ca.pem");
        std::fs::write(&ca_path, ca_pem).unwrap();
        let (crl, ca_cert) = ca.urls(base);
        assert_eq!(crl, format!("{base}/rp/pki/{}/crl", ca.id()));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cert_profile.py");
        let out = Command::new("python3")
            .arg(script)
            .args([
                cert_path.to_str().unwrap(),
                ca_path.to_str().unwrap(),
                upn,
                &crl,
                &ca_cert,
                &days.to_string(),
                sid.map_or("", |s| s.as_str()),
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{upn}:\n{text}{}", String::from_utf8_lossy(&out.stderr));
        eprintln!("{upn}:\n{text}");
    }
}
