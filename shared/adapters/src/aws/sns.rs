//! The SNS mobile push adapter of the push port: a device's token becomes a platform endpoint
//! of the app's platform application (`CreatePlatformEndpoint`; `SetEndpointAttributes` to
//! replace the token and enable it again), and a wake-up is one `Publish` to that endpoint with a
//! payload per platform (`MessageStructure=json`): a silent, content-available APNs push and an
//! FCM data message, each carrying only the wake-up's kind and id. A removed device's endpoint
//! goes with it (`DeleteEndpoint`).

use super::lazy::LazyClient;
use async_trait::async_trait;
use aws_sdk_sns::error::SdkError;
use aws_sdk_sns::Client;
use rp_ports::push::{EndpointRequest, Platform, Push, PushError, WakeUp};
use serde_json::json;

#[derive(Clone)]
pub struct SnsPush {
    client: LazyClient<Client>,
}

impl SnsPush {
    pub fn new(client: impl Into<LazyClient<Client>>) -> Self {
        Self { client: client.into() }
    }

    /// The message of `MessageStructure=json` for `wake` on `platform`.
    pub fn message(platform: Platform, wake: &WakeUp) -> String {
        let data = json!({"kind": wake.kind, "id": wake.id});
        let payload = match platform {
            Platform::Apns | Platform::ApnsSandbox => {
                json!({"aps": {"content-available": 1}, "kind": wake.kind, "id": wake.id})
            }
            Platform::Fcm => {
                json!({"fcmV1Message": {"message": {"data": data, "android": {"priority": "high"}}}})
            }
        };
        json!({"default": data.to_string(), platform.sns_key(): payload.to_string()}).to_string()
    }
}

/// A service error's code and message, for the ones the port tells apart.
fn classify<E, R>(err: SdkError<E, R>) -> PushError
where
    E: aws_sdk_sns::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let code = err.as_service_error().and_then(|e| e.code()).unwrap_or_default().to_owned();
    match code.as_str() {
        "EndpointDisabled" | "EndpointDisabledException" | "NotFound" | "NotFoundException" => {
            PushError::Gone
        }
        "PlatformApplicationDisabled" | "PlatformApplicationDisabledException" => PushError::NoApplication,
        "InvalidParameter" | "InvalidParameterException" => {
            let message = err.as_service_error().and_then(|e| e.message()).unwrap_or_default();
            PushError::Refused(format!("{code}: {message}"))
        }
        _ => PushError::unavailable(err),
    }
}

#[async_trait]
impl Push for SnsPush {
    async fn register(&self, request: EndpointRequest<'_>) -> Result<String, PushError> {
        let EndpointRequest { application, token, endpoint } = request;
        if let Some(endpoint) = endpoint {
            let updated = self
                .client
                .set_endpoint_attributes()
                .endpoint_arn(endpoint)
                .attributes("Token", token)
                .attributes("Enabled", "true")
                .send()
                .await;
            match updated.map_err(classify) {
                Ok(_) => return Ok(endpoint.to_owned()),
                // Deleted since: make a new one.
                Err(PushError::Gone) => {}
                Err(e) => return Err(e),
            }
        }
        let created = self
            .client
            .create_platform_endpoint()
            .platform_application_arn(application)
            .token(token)
            .send()
            .await
            // A create names no endpoint: what is not found is the application.
            .map_err(|e| match classify(e) {
                PushError::Gone => PushError::NoApplication,
                other => other,
            })?;
        created.endpoint_arn.ok_or_else(|| PushError::Refused("SNS answered no endpoint ARN".into()))
    }

    async fn send(&self, endpoint: &str, platform: Platform, wake: &WakeUp) -> Result<(), PushError> {
        self.client
            .publish()
            .target_arn(endpoint)
            .message_structure("json")
            .message(Self::message(platform, wake))
            .send()
            .await
            .map_err(classify)?;
        Ok(())
    }

    async fn remove(&self, endpoint: &str) -> Result<(), PushError> {
        match self.client.delete_endpoint().endpoint_arn(endpoint).send().await.map_err(classify) {
            Ok(_) | Err(PushError::Gone) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rp_domain::push::WakeKind;

    #[test]
    fn the_message_carries_the_kind_and_id_for_its_platform_only() {
        let wake = WakeUp { kind: WakeKind::Oob, id: "r-1".into() };
        let message: serde_json::Value =
            serde_json::from_str(&SnsPush::message(Platform::Apns, &wake)).unwrap();
        let apns: serde_json::Value = serde_json::from_str(message["APNS"].as_str().unwrap()).unwrap();
        assert_eq!(apns, json!({"aps": {"content-available": 1}, "kind": "oob", "id": "r-1"}));
        assert!(message.get("GCM").is_none());
        let message: serde_json::Value =
            serde_json::from_str(&SnsPush::message(Platform::Fcm, &wake)).unwrap();
        let fcm: serde_json::Value = serde_json::from_str(message["GCM"].as_str().unwrap()).unwrap();
        assert_eq!(fcm["fcmV1Message"]["message"]["data"], json!({"kind": "oob", "id": "r-1"}));
    }
}
