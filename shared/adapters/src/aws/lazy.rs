//! Service clients built at their first use.

use std::ops::Deref;
use std::sync::{Arc, LazyLock};

/// A service client built at its first use, then shared by every clone. Building one parses the
/// SDK's endpoint-partition table and assembles its runtime plugins: work a cold start skips for
/// a service its function never calls.
pub struct LazyClient<C>(Arc<LazyLock<C, Box<dyn FnOnce() -> C + Send>>>);

impl<C> LazyClient<C> {
    /// A client `build` makes at the first dereference.
    pub fn new(build: impl FnOnce() -> C + Send + 'static) -> Self {
        Self(Arc::new(LazyLock::new(Box::new(build))))
    }
}

impl<C> Clone for LazyClient<C> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

/// A client built already (the tests' clients, each pointed at its own endpoint).
impl<C: Send + 'static> From<C> for LazyClient<C> {
    fn from(client: C) -> Self {
        Self::new(move || client)
    }
}

impl<C> Deref for LazyClient<C> {
    type Target = C;

    fn deref(&self) -> &C {
        &self.0
    }
}
