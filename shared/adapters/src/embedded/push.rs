//! The embedded push service: it reaches no phone. It records each wake-up it would send, one
//! JSON line per wake-up in `pushes.jsonl` in the data directory (0600), which `rp-admin pushes`
//! prints, so a developer sees what a phone would have been told. A phone on the local server
//! long-polls its requests instead (`?waitSecs=`).

use async_trait::async_trait;
use rp_ports::push::{EndpointRequest, Platform, Push, PushError, WakeUp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file, in the data directory, that the wake-ups are recorded in.
pub const PUSH_LOG: &str = "pushes.jsonl";

/// One recorded wake-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SentPush {
    pub endpoint: String,
    pub platform: Platform,
    pub wake: WakeUp,
}

pub struct EmbeddedPush {
    log: PathBuf,
    /// Appends are whole lines: one writer at a time.
    writing: Mutex<()>,
}

impl EmbeddedPush {
    pub fn new(data_dir: &Path) -> Self {
        Self { log: data_dir.join(PUSH_LOG), writing: Mutex::new(()) }
    }

    /// The wake-ups recorded in `data_dir`, oldest first.
    pub fn sent(data_dir: &Path) -> std::io::Result<Vec<SentPush>> {
        let text = match std::fs::read_to_string(data_dir.join(PUSH_LOG)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect())
    }

    fn append(&self, sent: &SentPush) -> std::io::Result<()> {
        let mut line = serde_json::to_string(sent).map_err(std::io::Error::other)?;
        line.push('\n');
        let _one = self.writing.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        options.open(&self.log)?.write_all(line.as_bytes())
    }
}

#[async_trait]
impl Push for EmbeddedPush {
    /// An endpoint id of the application and token (the same token gets the same id, as SNS
    /// answers a repeated `CreatePlatformEndpoint`); an existing endpoint keeps its id.
    async fn register(&self, request: EndpointRequest<'_>) -> Result<String, PushError> {
        let EndpointRequest { application, token, endpoint } = request;
        if let Some(endpoint) = endpoint {
            return Ok(endpoint.to_owned());
        }
        let digest = Sha256::digest(format!("{application}\n{token}").as_bytes());
        Ok(format!("local:{}", &hex::encode(digest)[..32]))
    }

    async fn send(&self, endpoint: &str, platform: Platform, wake: &WakeUp) -> Result<(), PushError> {
        let sent = SentPush { endpoint: endpoint.to_owned(), platform, wake: wake.clone() };
        self.append(&sent).map_err(PushError::unavailable)
    }

    /// Nothing to delete: an endpoint here is a name derived from its token, and no token is
    /// kept.
    async fn remove(&self, _endpoint: &str) -> Result<(), PushError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_domain::push::WakeKind;

    #[tokio::test]
    async fn wake_ups_are_recorded_and_endpoints_are_stable() {
        let dir = tempfile::tempdir().unwrap();
        let push = EmbeddedPush::new(dir.path());
        let at = |token, endpoint| EndpointRequest { application: "app/APNS/x", token, endpoint };
        let first = push.register(at("token-1", None)).await.unwrap();
        assert_eq!(push.register(at("token-1", None)).await.unwrap(), first);
        assert_ne!(push.register(at("token-2", None)).await.unwrap(), first);
        assert_eq!(push.register(at("token-2", Some(&first))).await.unwrap(), first);
        let wake = WakeUp { kind: WakeKind::Oob, id: "r-1".into() };
        push.send(&first, Platform::Apns, &wake).await.unwrap();
        let sent = EmbeddedPush::sent(dir.path()).unwrap();
        assert_eq!(sent, [SentPush { endpoint: first, platform: Platform::Apns, wake }]);
        assert!(!std::fs::read_to_string(dir.path().join(PUSH_LOG)).unwrap().contains("token-1"));
    }
}
