//! Test-only package: see `tests/`. What more than one test binary needs lives here.

use std::sync::{Arc, Mutex};

/// Collects every log line written to it, for tests that read their own logs.
#[derive(Clone, Default)]
pub struct Captured(pub Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One entry of the `cargo lambda watch` router in the workspace's `Cargo.toml`, as
/// `tests/generated.rs` writes it: `{ path = "...", methods = [...], function = "..." }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchRoute {
    /// As the router writes it: a greedy `{proxy+}` is `{*proxy}` ([`watch_path`]).
    pub path: String,
    /// Empty for the catch-all, which takes every method.
    pub methods: Vec<String>,
    pub function: String,
}

/// Every entry of the router in `manifest` (the workspace's `Cargo.toml`), in order.
pub fn watch_routes(manifest: &str) -> Vec<WatchRoute> {
    let quoted = |text: &str| text.trim().trim_matches('"').to_owned();
    let entries = manifest.lines().filter_map(|l| l.strip_prefix("  { path = \"")?.strip_suffix("\" },"));
    entries
        .map(|entry| {
            let (path, rest) = entry.split_once('"').expect("a quoted path");
            let (methods, function) = match rest.split_once(", methods = [") {
                Some((_, rest)) => rest.split_once("], function = \"").expect("then the function"),
                None => ("", rest.strip_prefix(", function = \"").expect("a function")),
            };
            let methods = methods.split(',').filter(|m| !m.trim().is_empty()).map(quoted).collect();
            WatchRoute { path: path.to_owned(), methods, function: function.to_owned() }
        })
        .collect()
}

/// `path` as the router (matchit) writes it: API Gateway's greedy `{proxy+}` is its catch-all
/// `{*proxy}` (a plain `{proxy+}` would take one segment).
pub fn watch_path(path: &str) -> String {
    match path.strip_suffix("+}").and_then(|p| p.rsplit_once('{')) {
        Some((prefix, name)) => format!("{prefix}{{*{name}}}"),
        None => path.to_owned(),
    }
}
