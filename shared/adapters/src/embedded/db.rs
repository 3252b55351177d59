//! The data directory's redb database, shared by the store and the queue.

use redb::TableDefinition;
use rp_ports::StoreError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Items, by `(pk, sk)`.
pub(super) const ITEMS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("items");
/// Index entries: `("<index>\0<index pk>", "<index sk>\0<pk>\0<sk>")`, so entries sort by index
/// sort key and stay unique per item.
pub(super) const INDEX: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("index");
/// `(queue, visible at (epoch ms), message id)` → message.
pub(super) const MESSAGES: TableDefinition<(&str, u64, &str), &[u8]> = TableDefinition::new("queue_messages");
/// `(queue, moved at (epoch ms), message id)` → message.
pub(super) const DEAD: TableDefinition<(&str, u64, &str), &[u8]> = TableDefinition::new("queue_dead_letters");

/// A shared handle to the data directory's database.
#[derive(Clone)]
pub struct EmbeddedDb {
    db: Arc<redb::Database>,
    dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create data directory {path}")]
    Dir { path: PathBuf, source: std::io::Error },
    #[error("cannot open database {path}")]
    Database { path: PathBuf, source: Box<redb::Error> },
    #[error("cannot use key file {path}")]
    Keys { path: PathBuf, source: std::io::Error },
}

impl EmbeddedDb {
    /// Opens (creating on first use) the database in `dir`. A directory it creates is private
    /// to the user (0700), and the database file always is (0600).
    pub fn open(dir: &Path) -> Result<Self, OpenError> {
        let dir_err = |source| OpenError::Dir { path: dir.to_owned(), source };
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(dir_err)?;
            private(dir, 0o700).map_err(dir_err)?;
        }
        let path = dir.join("rp.redb");
        let wrap = |e: redb::Error| OpenError::Database { path: path.clone(), source: Box::new(e) };
        let db = redb::Database::create(&path).map_err(|e| wrap(e.into()))?;
        private(&path, 0o600).map_err(dir_err)?;
        let tx = db.begin_write().map_err(|e| wrap(e.into()))?;
        tx.open_table(ITEMS).map_err(|e| wrap(e.into()))?;
        tx.open_table(INDEX).map_err(|e| wrap(e.into()))?;
        tx.open_table(MESSAGES).map_err(|e| wrap(e.into()))?;
        tx.open_table(DEAD).map_err(|e| wrap(e.into()))?;
        tx.commit().map_err(|e| wrap(e.into()))?;
        Ok(Self { db: Arc::new(db), dir: dir.to_owned() })
    }

    pub fn database(&self) -> &redb::Database {
        &self.db
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Sets `mode` on `path` (Unix only; elsewhere the platform's defaults stand).
fn private(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    let _ = (path, mode);
    Ok(())
}

pub(crate) fn db_err(err: impl Into<redb::Error>) -> StoreError {
    StoreError::unavailable(err.into())
}
