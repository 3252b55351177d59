//! Strong certificate mapping for Windows logon (Microsoft KB5014754): a domain controller in
//! full enforcement refuses a logon certificate that names its user only by UPN. The agent
//! writes the user's security identifier (SID) in the SID extension, read from a map of user
//! principal names to SIDs exported from Active Directory (`--sid-map`).

use anyhow::Context as _;
use std::collections::HashMap;
use std::path::Path;
use x509_cert::der::asn1::{ObjectIdentifier, OctetString};
use x509_cert::der::{Any, Encode as _};
use x509_cert::ext::pkix::name::{GeneralName, OtherName};

/// The SID extension, szOID_NTDS_CA_SECURITY_EXT.
pub const SID_EXTENSION: &[u64] = &[1, 3, 6, 1, 4, 1, 311, 25, 2];
/// The otherName in it that holds the SID, szOID_NTDS_OBJECTSID.
const OBJECT_SID: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.311.25.2.1");

/// A security identifier in its string form (MS-DTYP 2.4.2.1), as Active Directory prints it:
/// `S-1-`, the identifier authority, and one to fifteen sub-authorities, each in canonical
/// decimal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sid(String);

impl std::str::FromStr for Sid {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Self> {
        let bad = || anyhow::anyhow!("'{text}' is not a SID (S-1-5-21-…)");
        let rest = text.strip_prefix("S-1-").ok_or_else(bad)?;
        let mut parts = rest.split('-');
        let authority = parts.next().ok_or_else(bad)?;
        // The identifier authority is six bytes; sub-authorities are four.
        let canonical =
            |part: &str, max: u64| part.parse::<u64>().is_ok_and(|n| n <= max && n.to_string() == part);
        let subs: Vec<&str> = parts.collect();
        let fits = canonical(authority, (1 << 48) - 1)
            && (1..=15).contains(&subs.len())
            && subs.iter().all(|s| canonical(s, u64::from(u32::MAX)));
        fits.then(|| Self(text.to_owned())).ok_or_else(bad)
    }
}

impl Sid {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The SID extension naming this SID: GeneralNames with one otherName
    /// (szOID_NTDS_OBJECTSID, an OCTET STRING of the SID's string form), not critical, as
    /// Active Directory Certificate Services writes it.
    pub fn extension(&self) -> anyhow::Result<rcgen::CustomExtension> {
        let value = Any::encode_from(&OctetString::new(self.0.as_bytes())?)?;
        let names = vec![GeneralName::OtherName(OtherName { type_id: OBJECT_SID, value })];
        Ok(rcgen::CustomExtension::from_oid_content(SID_EXTENSION, names.to_der()?))
    }
}

/// Each user's SID by user principal name (compared without case, as Active Directory does).
#[derive(Debug, Default)]
pub struct SidMap(HashMap<String, Sid>);

impl SidMap {
    /// Reads the map from a CSV file with the columns `UserPrincipalName` and `SID` (in any case
    /// and order, beside any others), as PowerShell writes it:
    /// `Get-ADUser -Filter * | Select-Object UserPrincipalName,SID | Export-Csv sids.csv`.
    /// A `#TYPE` line and a byte order mark are skipped, and so are accounts without a UPN.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let bytes = std::fs::read(path).with_context(|| format!("reading the SID map {}", path.display()))?;
        Self::parse(&bytes).with_context(|| format!("the SID map {}", path.display()))
    }

    fn parse(bytes: &[u8]) -> anyhow::Result<Self> {
        // Windows PowerShell writes UTF-16 when asked for `-Encoding Unicode`.
        if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
            anyhow::bail!("it is UTF-16: export it with -Encoding UTF8 (or ASCII)");
        }
        let mut reader =
            csv::ReaderBuilder::new().comment(Some(b'#')).trim(csv::Trim::All).from_reader(bytes);
        let headers = reader.headers()?.clone();
        let column = |name: &str| {
            headers.iter().position(|h| h.eq_ignore_ascii_case(name)).with_context(|| {
                format!(
                    "it has no {name} column (its columns: {})",
                    headers.iter().collect::<Vec<_>>().join(", ")
                )
            })
        };
        let (upn_at, sid_at) = (column("UserPrincipalName")?, column("SID")?);
        let mut map = HashMap::new();
        for row in reader.records() {
            let row = row?;
            let line = row.position().map_or(0, |p| p.line());
            let upn = row.get(upn_at).unwrap_or_default();
            if upn.is_empty() {
                continue;
            }
            let sid: Sid =
                row.get(sid_at).unwrap_or_default().parse().with_context(|| format!("line {line}"))?;
            match map.insert(upn.to_lowercase(), sid.clone()) {
                Some(earlier) if earlier != sid => {
                    anyhow::bail!(
                        "line {line}: {upn} is mapped to two SIDs, {} and {}",
                        earlier.as_str(),
                        sid.as_str()
                    )
                }
                _ => {}
            }
        }
        Ok(Self(map))
    }

    /// The SID of the user `upn`.
    pub fn get(&self, upn: &str) -> Option<&Sid> {
        self.0.get(&upn.to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sids_are_read_in_their_canonical_string_form() {
        for good in [
            "S-1-5-21-3623811015-3361044348-30300820-1013",
            "S-1-5-32-544",
            "S-1-1-0",
            "S-1-281474976710655-4294967295",
        ] {
            assert_eq!(good.parse::<Sid>().unwrap().as_str(), good);
        }
        let sixteen = format!("S-1-5{}", "-1".repeat(16));
        for bad in [
            "",
            "S-1-5",
            "S-1-",
            "S-2-5-21",
            "s-1-5-21",
            "S-1-5-21-",
            "S-1-5--21",
            "S-1-5-021",
            "S-1-5-+21",
            "S-1-5-4294967296",
            "S-1-281474976710656-1",
            "S-1-5-21 ",
            "S-1-5-x",
            &sixteen,
        ] {
            let err = bad.parse::<Sid>().unwrap_err().to_string();
            assert!(err.contains("is not a SID"), "{bad}: {err}");
        }
        assert!(format!("S-1-5{}", "-1".repeat(15)).parse::<Sid>().is_ok(), "fifteen sub-authorities");
    }

    /// The bytes ADCS writes: SEQUENCE { [0] { OID 1.3.6.1.4.1.311.25.2.1, [0] { OCTET STRING
    /// "S-1-…" } } }.
    #[test]
    fn the_extension_is_general_names_with_the_sid_as_an_other_name() {
        let sid: Sid = "S-1-5-21-1-2-3-1001".parse().unwrap();
        let ext = sid.extension().unwrap();
        assert_eq!(ext.oid_components().collect::<Vec<_>>(), SID_EXTENSION);
        assert!(!ext.criticality());
        let want = format!("3025a023060a2b060104018237190201a0150413{}", hex::encode("S-1-5-21-1-2-3-1001"));
        assert_eq!(hex::encode(ext.content()), want);
    }

    #[test]
    fn a_powershell_export_is_read_with_its_type_line_and_byte_order_mark() {
        let csv = "\u{feff}#TYPE Selected.Microsoft.ActiveDirectory.Management.ADUser\r\n\
                   \"SID\",\"UserPrincipalName\",\"Name\"\r\n\
                   \"S-1-5-21-1-2-3-1001\",\"Alice@Corp.Example.com\",\"Alice, A.\"\r\n\
                   \"S-1-5-21-1-2-3-1002\",\"\",\"svc-backup\"\r\n\
                   \"S-1-5-21-1-2-3-1003\",\"bob@corp.example.com\",\"Bob\"\r\n\
                   \"S-1-5-21-1-2-3-1003\",\"BOB@corp.example.com\",\"Bob\"\r\n";
        let map = SidMap::parse(csv.as_bytes()).unwrap();
        assert_eq!(map.0.len(), 2, "the account without a UPN is passed over: {map:?}");
        assert_eq!(map.get("alice@corp.example.com").unwrap().as_str(), "S-1-5-21-1-2-3-1001");
        assert_eq!(map.get("ALICE@CORP.EXAMPLE.COM").unwrap().as_str(), "S-1-5-21-1-2-3-1001");
        assert_eq!(map.get("Bob@Corp.Example.Com").unwrap().as_str(), "S-1-5-21-1-2-3-1003");
        assert!(map.get("carol@corp.example.com").is_none());
        // Unquoted, trimmed, in another order: the same.
        let plain =
            SidMap::parse(b"userprincipalname , sid\n alice@corp.example.com , S-1-5-21-1-2-3-1001 \n")
                .unwrap();
        assert_eq!(plain.get("alice@corp.example.com").unwrap().as_str(), "S-1-5-21-1-2-3-1001");
    }

    #[test]
    fn a_map_that_cannot_be_trusted_is_refused_whole() {
        let refused = |csv: &str| format!("{:#}", SidMap::parse(csv.as_bytes()).unwrap_err());
        assert_eq!(
            refused("UPN,SID\na@x.example,S-1-5-21-1\n"),
            "it has no UserPrincipalName column (its columns: UPN, SID)"
        );
        assert!(SidMap::parse(b"UserPrincipalName,Sid\na@x.example,S-1-5-21-1\n").is_ok(), "any case");
        assert_eq!(
            refused("UserPrincipalName,Name\na@x.example,A\n"),
            "it has no SID column (its columns: UserPrincipalName, Name)"
        );
        assert_eq!(
            refused("UserPrincipalName,SID\na@x.example,S-1-5-21-1\nb@x.example,1001\n"),
            "line 3: '1001' is not a SID (S-1-5-21-…)"
        );
        assert_eq!(
            refused("UserPrincipalName,SID\na@x.example,S-1-5-21-1\nA@X.example,S-1-5-21-2\n"),
            "line 3: A@X.example is mapped to two SIDs, S-1-5-21-1 and S-1-5-21-2"
        );
        assert!(refused("UserPrincipalName,SID\na@x.example,S-1-5-21-1,extra\n").contains("fields"));
        let utf16: Vec<u8> = [0xFEFF_u16]
            .into_iter()
            .chain("UserPrincipalName,SID\n".encode_utf16())
            .flat_map(u16::to_le_bytes)
            .collect();
        let big_endian: Vec<u8> = utf16.chunks(2).flat_map(|pair| [pair[1], pair[0]]).collect();
        for text in [utf16, big_endian] {
            let err = SidMap::parse(&text).unwrap_err().to_string();
            assert_eq!(err, "it is UTF-16: export it with -Encoding UTF8 (or ASCII)");
        }
    }
}
