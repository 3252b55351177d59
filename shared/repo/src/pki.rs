//! The agent's CAs as published: one item per CA, `PKI#<CA id>` / `CRL`, holding its certificate
//! and latest CRL (DER, base64) with the CRL's number and times. Replaced conditionally on the
//! version read, so two uploads racing cannot put an older CRL over a newer one.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rp_domain::pki::PublishedCrl;
use rp_domain::time::EpochMillis;
use rp_ports::{Condition, Item, ItemKey, ItemStore, StoreError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CrlItem {
    ca_certificate: String,
    crl: String,
    /// Big-endian, hex.
    number: String,
    this_update: EpochMillis,
    next_update: Option<EpochMillis>,
}

pub struct Pki<'a> {
    store: &'a dyn ItemStore,
}

fn key(ca_id: &str) -> ItemKey {
    ItemKey::new(format!("PKI#{ca_id}"), "CRL")
}

impl<'a> Pki<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    /// What is published for CA `ca_id`, and the condition a replacement writes under.
    pub async fn get(&self, ca_id: &str) -> Result<(Option<PublishedCrl>, Condition), StoreError> {
        let Some(item) = self.store.get(&key(ca_id)).await? else {
            return Ok((None, Condition::Absent));
        };
        let stored: CrlItem = item.data()?;
        let bytes = |text: &str| STANDARD.decode(text).map_err(StoreError::encoding);
        let number = if stored.number == "0" {
            Vec::new()
        } else {
            hex::decode(&stored.number).map_err(StoreError::encoding)?
        };
        let published = PublishedCrl {
            ca_id: ca_id.to_owned(),
            ca_certificate: bytes(&stored.ca_certificate)?,
            crl: bytes(&stored.crl)?,
            number,
            this_update: stored.this_update,
            next_update: stored.next_update,
        };
        Ok((Some(published), Condition::Version(item.version)))
    }

    /// Publishes `crl`, if the condition from [`Self::get`] still holds.
    pub async fn put(&self, crl: &PublishedCrl, condition: Condition) -> Result<(), StoreError> {
        let item = CrlItem {
            ca_certificate: STANDARD.encode(&crl.ca_certificate),
            crl: STANDARD.encode(&crl.crl),
            number: crl.number_hex(),
            this_update: crl.this_update,
            next_update: crl.next_update,
        };
        self.store.put(Item::new(key(&crl.ca_id), &item)?, condition).await?;
        Ok(())
    }
}
