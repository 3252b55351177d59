//! How an area's routers are written: the [`routers!`] table, and the wrappers and answers its
//! rows share.

use crate::extract::BodyLimit;
use axum::extract::DefaultBodyLimit;
use axum::{Extension, Router};
use rp_app::AppState;

/// An area's routers, one a path: `name("/path") = method router;`, each wrapped by `$wrap`
/// (a rate-limit gate, a body limit), or by [`plain`]. Each is documented with its path.
macro_rules! routers {
    ($wrap:path; $( $(#[$attr:meta])* $name:ident($path:literal) = $route:expr; )*) => {
        $(
            #[doc = concat!("`", $path, "`")]
            $(#[$attr])*
            pub fn $name(state: &::rp_app::AppState) -> axum::Router<::rp_app::AppState> {
                $wrap(axum::Router::new().route($path, $route), state)
            }
        )*
    };
}

/// A router as it is: the wrapper of an area whose routes need none.
pub(crate) fn plain(router: Router<AppState>, _state: &AppState) -> Router<AppState> {
    router
}

/// `router` with a body limit of its own (`limit` bytes), the server's being smaller.
pub(crate) fn body_limit(router: Router<AppState>, limit: usize) -> Router<AppState> {
    router.layer(DefaultBodyLimit::max(limit)).layer(Extension(BodyLimit(limit)))
}
