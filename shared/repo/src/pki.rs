//! The agent's CAs as published. Layout, in the CA's partition `PKI#<CA id>`:
//!
//! | sk | item |
//! |---|---|
//! | `CRL` | the CA certificate and the latest CRL's number and times; the CRL itself (DER, base64) when it fits in the item |
//! | `CRL#<number>#<part, 4 digits>` | a part of a CRL too large for one item (DynamoDB keeps 400 KB an item), each [`PART_CHARS`] of its base64 |
//!
//! A CRL is replaced in one transaction conditional on the `CRL` item's version read: its parts,
//! the `CRL` item, and the deletion of the parts of the CRL it replaces. So two uploads racing
//! cannot put an older CRL over a newer one, and a reader never sees parts of two CRLs: it reads
//! `CRL`, then the parts its number names at once, and reads again if a newer CRL deleted them
//! in between.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rp_domain::pki::PublishedCrl;
use rp_domain::time::EpochMillis;
use rp_ports::{Condition, Item, ItemKey, ItemStore, StoreError, WriteOp};
use serde::{Deserialize, Serialize};

/// The base64 characters one part holds: well under DynamoDB's 400 KB item, with its key.
pub const PART_CHARS: usize = 350_000;

/// How often a read starts again when newer CRLs replace the one it is reading.
const READ_ATTEMPTS: usize = 5;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CrlItem {
    ca_certificate: String,
    /// The CRL when it fits in this item; else it is in `parts` parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crl: Option<String>,
    #[serde(default)]
    parts: usize,
    /// Big-endian, hex.
    number: String,
    this_update: EpochMillis,
    next_update: Option<EpochMillis>,
}

#[derive(Serialize, Deserialize)]
struct Part {
    data: String,
}

/// What is published for a CA, as read: the condition a replacement writes under, and the parts
/// it deletes.
pub struct Stored {
    condition: Condition,
    parts: Vec<ItemKey>,
}

pub struct Pki<'a> {
    store: &'a dyn ItemStore,
}

fn partition(ca_id: &str) -> String {
    format!("PKI#{ca_id}")
}

fn key(ca_id: &str) -> ItemKey {
    ItemKey::new(partition(ca_id), "CRL")
}

fn part_keys(ca_id: &str, number: &str, parts: usize) -> Vec<ItemKey> {
    (0..parts).map(|at| ItemKey::new(partition(ca_id), format!("CRL#{number}#{at:04}"))).collect()
}

impl<'a> Pki<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// What is published for CA `ca_id`, and what a replacement needs of it.
    pub async fn get(&self, ca_id: &str) -> Result<(Option<PublishedCrl>, Stored), StoreError> {
        for _ in 0..READ_ATTEMPTS {
            let Some(item) = self.store.get(&key(ca_id)).await? else {
                return Ok((None, Stored { condition: Condition::Absent, parts: Vec::new() }));
            };
            let stored: CrlItem = item.data()?;
            let parts = part_keys(ca_id, &stored.number, stored.parts);
            let crl = match &stored.crl {
                Some(inline) => inline.clone(),
                None => {
                    let reads = parts.iter().map(|key| self.store.get(key)).collect();
                    let found: Option<Vec<Item>> = crate::at_once(reads).await?.into_iter().collect();
                    // A newer CRL replaced this one between the reads: read it instead.
                    let Some(found) = found else { continue };
                    found
                        .iter()
                        .map(|item| Ok(item.data::<Part>()?.data))
                        .collect::<Result<String, StoreError>>()?
                }
            };
            let published = published(ca_id, &stored, &crl)?;
            return Ok((Some(published), Stored { condition: Condition::Version(item.version), parts }));
        }
        Err(StoreError::Conflict)
    }

    /// Publishes `crl` (at most [`rp_domain::pki::MAX_CRL_BYTES`], so that its parts and the
    /// `CRL` item stay under the 4 MB a DynamoDB transaction writes) in place of what
    /// [`Self::get`] read as `stored`, if it is still there; [`StoreError::Conflict`] if not.
    pub async fn put(&self, crl: &PublishedCrl, stored: Stored) -> Result<(), StoreError> {
        let encoded = STANDARD.encode(&crl.crl);
        let number = crl.number_hex();
        let mut item = CrlItem {
            ca_certificate: STANDARD.encode(&crl.ca_certificate),
            crl: None,
            parts: 0,
            number: number.clone(),
            this_update: crl.this_update,
            next_update: crl.next_update,
        };
        let mut ops = Vec::new();
        if encoded.len() + item.ca_certificate.len() <= PART_CHARS {
            item.crl = Some(encoded);
        } else {
            let chunks: Vec<&str> = encoded
                .as_bytes()
                .chunks(PART_CHARS)
                .map(|chunk| std::str::from_utf8(chunk).expect("base64 is ASCII"))
                .collect();
            item.parts = chunks.len();
            for (key, chunk) in part_keys(&crl.ca_id, &number, chunks.len()).into_iter().zip(chunks) {
                let part = Item::new(key, &Part { data: chunk.to_owned() })?;
                ops.push(WriteOp::Put { item: part, condition: Condition::Any });
            }
        }
        ops.push(WriteOp::Put { item: Item::new(key(&crl.ca_id), &item)?, condition: stored.condition });
        // The parts of the CRL replaced go in the same write (none share a key with the new
        // one's: a CRL of the same number is never written again).
        ops.extend(stored.parts.into_iter().map(|key| WriteOp::Delete { key, condition: Condition::Any }));
        self.store.transact(ops).await
    }
}

fn published(ca_id: &str, stored: &CrlItem, crl: &str) -> Result<PublishedCrl, StoreError> {
    let bytes = |text: &str| STANDARD.decode(text).map_err(StoreError::encoding);
    let number = if stored.number == "0" {
        Vec::new()
    } else {
        hex::decode(&stored.number).map_err(StoreError::encoding)?
    };
    Ok(PublishedCrl {
        ca_id: ca_id.to_owned(),
        ca_certificate: bytes(&stored.ca_certificate)?,
        crl: bytes(crl)?,
        number,
        this_update: stored.this_update,
        next_update: stored.next_update,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_ports::Query;

    const CA: &str = "00112233aabbccdd";

    /// A CRL numbered `number` whose base64 (`crl_bytes` bytes, a multiple of 3) and its CA
    /// certificate's (300 bytes: 400 characters) add up to what it says.
    fn crl(number: u8, crl_bytes: usize) -> PublishedCrl {
        PublishedCrl {
            ca_id: CA.to_owned(),
            ca_certificate: vec![0x30; 300],
            crl: vec![number; crl_bytes],
            number: vec![number],
            this_update: EpochMillis(1_800_000_000_000),
            next_update: None,
        }
    }

    /// The sort keys of the CA's partition.
    async fn layout(store: &dyn ItemStore) -> Vec<String> {
        let page = store.query(Query::table(partition(CA)).limit(100)).await.unwrap();
        page.items.into_iter().map(|item| item.key.sk).collect()
    }

    #[tokio::test]
    async fn a_crl_that_fits_its_item_is_stored_whole_and_a_larger_one_in_parts() {
        let backend = crate::TestBackend::new();
        let pki = Pki::new(backend.store.as_ref());
        // 349,600 characters of CRL and 400 of certificate: PART_CHARS to the character.
        let fits = crl(1, 262_200);
        let (_, stored) = pki.get(CA).await.unwrap();
        pki.put(&fits, stored).await.unwrap();
        assert_eq!(layout(backend.store.as_ref()).await, ["CRL"], "one item, read with one get");
        let (read, stored) = pki.get(CA).await.unwrap();
        assert_eq!(read.as_ref(), Some(&fits));
        // Four characters more.
        let over = crl(2, 262_203);
        pki.put(&over, stored).await.unwrap();
        assert_eq!(layout(backend.store.as_ref()).await, ["CRL", "CRL#02#0000"]);
        let (read, stored) = pki.get(CA).await.unwrap();
        assert_eq!(read.as_ref(), Some(&over));
        // The part goes with the CRL it held.
        pki.put(&crl(3, 262_200), stored).await.unwrap();
        assert_eq!(layout(backend.store.as_ref()).await, ["CRL"]);
    }
}
