//! The agent's CAs as verifiers see them: publishing a CRL, and reading what is published.

use crate::HasStore;
use rp_domain::pki::{self, PkiError, PublishedCrl};
use rp_ports::metrics::{self, Metric};
use rp_ports::retry_on_conflict;
use rp_repo::pki::Pki;

/// Publishes `crl` (checked by [`pki::check_upload`]) unless a newer one is published; `true`
/// when it was written, `false` when the same CRL was there already.
pub async fn publish(state: &impl HasStore, crl: &PublishedCrl) -> Result<bool, PkiError> {
    let repo = &Pki::new(state.store());
    let written = retry_on_conflict(|| async move {
        let (published, condition) = repo.get(&crl.ca_id).await?;
        if !pki::replaces(published.as_ref(), crl)? {
            return Ok::<_, PkiError>(false);
        }
        repo.put(crl, condition).await?;
        Ok(true)
    })
    .await?;
    if written {
        tracing::info!(ca_id = %crl.ca_id, crl_number = %crl.number_hex(), "CRL published");
        metrics::count(Metric::CrlPublished, 1, Some(("CaId", &crl.ca_id)));
    }
    Ok(written)
}

/// What is published for CA `ca_id`.
pub async fn published(state: &impl HasStore, ca_id: &str) -> Result<PublishedCrl, PkiError> {
    let (published, _) = Pki::new(state.store()).get(ca_id).await?;
    published.ok_or_else(|| PkiError::NotFound(ca_id.to_owned()))
}
