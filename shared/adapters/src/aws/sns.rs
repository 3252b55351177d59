//! The SNS mobile push adapter of the push port: a device's token becomes a platform endpoint
//! of the app's platform application (`CreatePlatformEndpoint`; `SetEndpointAttributes` to
//! replace the token and enable it again; SNS keeps one endpoint per token, and one it already
//! held is taken over and enabled), and a wake-up is one `Publish` to that endpoint with a
//! payload per platform (`MessageStructure=json`): a silent, content-available APNs push and an
//! FCM data message, each carrying only the wake-up's kind and id. A removed device's endpoint
//! goes with it (`DeleteEndpoint`).

use super::lazy::LazyClient;
use async_trait::async_trait;
use aws_sdk_sns::error::{ProvideErrorMetadata, SdkError};
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
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
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

/// The endpoint SNS names when it refuses to create one for a token it already holds under
/// other attributes (`InvalidParameter`: "… Endpoint <arn> already exists with the same Token,
/// but different attributes."): an endpoint made for this phone before, disabled since or
/// carrying other user data.
fn existing_endpoint(message: &str) -> Option<&str> {
    let start = message.find("Endpoint arn:")? + "Endpoint ".len();
    let arn = message[start..].split_whitespace().next()?;
    let rest = message[start + arn.len()..].trim_start().to_ascii_lowercase();
    rest.starts_with("already exists with the same token").then_some(arn)
}

impl SnsPush {
    /// Sets `endpoint`'s token to `token` and enables it.
    async fn set_token(&self, endpoint: &str, token: &str) -> Result<(), PushError> {
        self.client
            .set_endpoint_attributes()
            .endpoint_arn(endpoint)
            .attributes("Token", token)
            .attributes("Enabled", "true")
            .send()
            .await
            .map_err(classify)?;
        Ok(())
    }

    /// An endpoint of `application` for `token`: a new one, or the one SNS already holds for the
    /// token, with its token set and enabled (SNS answers a create with that one, even disabled,
    /// or refuses the create naming it). `Gone` when that endpoint went meanwhile.
    async fn endpoint_for(&self, application: &str, token: &str) -> Result<String, PushError> {
        let created = self
            .client
            .create_platform_endpoint()
            .platform_application_arn(application)
            .token(token)
            .send()
            .await;
        let endpoint = match created {
            Ok(created) => created
                .endpoint_arn
                .ok_or_else(|| PushError::Refused("SNS answered no endpoint ARN".into()))?,
            Err(err) => {
                let refusal = err.as_service_error().filter(|e| e.code() == Some("InvalidParameter"));
                let held = refusal.and_then(|e| e.message()).and_then(existing_endpoint);
                if let Some(endpoint) = held.map(str::to_owned) {
                    self.set_token(&endpoint, token).await?;
                    return Ok(endpoint);
                }
                // A create names no endpoint: what is not found is the application.
                return Err(match classify(err) {
                    PushError::Gone => PushError::NoApplication,
                    other => other,
                });
            }
        };
        let read =
            self.client.get_endpoint_attributes().endpoint_arn(&endpoint).send().await.map_err(classify)?;
        let attributes = read.attributes.unwrap_or_default();
        let enabled = attributes.get("Enabled").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !enabled || attributes.get("Token").map(String::as_str) != Some(token) {
            self.set_token(&endpoint, token).await?;
        }
        Ok(endpoint)
    }
}

#[async_trait]
impl Push for SnsPush {
    async fn register(&self, request: EndpointRequest<'_>) -> Result<String, PushError> {
        let EndpointRequest { application, token, endpoint } = request;
        if let Some(endpoint) = endpoint {
            match self.set_token(endpoint, token).await {
                Ok(()) => return Ok(endpoint.to_owned()),
                // Deleted since: make a new one.
                Err(PushError::Gone) => {}
                Err(e) => return Err(e),
            }
        }
        match self.endpoint_for(application, token).await {
            // Deleted between its create and its read: once more. Twice is SNS misbehaving.
            Err(PushError::Gone) => self.endpoint_for(application, token).await.map_err(|e| match e {
                PushError::Gone => PushError::unavailable(std::io::Error::other(
                    "SNS deleted the token's endpoint twice while it was registered",
                )),
                other => other,
            }),
            done => done,
        }
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

    const HELD: &str = "arn:aws:sns:us-east-1:123456789012:endpoint/APNS/app/held";
    const MADE: &str = "arn:aws:sns:us-east-1:123456789012:endpoint/APNS/app/made";
    const APPLICATION: &str = "arn:aws:sns:us-east-1:123456789012:app/APNS/app";

    /// SNS's answer to `action`, with `result` inside (awsQuery XML).
    fn answer(action: &str, result: &str) -> (u16, String) {
        let ns = "http://sns.amazonaws.com/doc/2010-03-31/";
        let body = format!(
            "<{action}Response xmlns=\"{ns}\"><{action}Result>{result}</{action}Result>\
             <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></{action}Response>"
        );
        (200, body)
    }

    fn refusal(code: &str, message: &str) -> (u16, String) {
        let body = format!(
            "<ErrorResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\"><Error><Type>Sender</Type>\
             <Code>{code}</Code><Message>{message}</Message></Error><RequestId>r</RequestId></ErrorResponse>"
        );
        (400, body)
    }

    fn created(arn: &str) -> (u16, String) {
        answer("CreatePlatformEndpoint", &format!("<EndpointArn>{arn}</EndpointArn>"))
    }

    fn attributes(enabled: &str, token: &str) -> (u16, String) {
        let entry = |k: &str, v: &str| format!("<entry><key>{k}</key><value>{v}</value></entry>");
        answer(
            "GetEndpointAttributes",
            &format!("<Attributes>{}{}</Attributes>", entry("Enabled", enabled), entry("Token", token)),
        )
    }

    fn set() -> (u16, String) {
        let body = "<SetEndpointAttributesResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\">\
                    <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></SetEndpointAttributesResponse>";
        (200, body.to_owned())
    }

    /// Registers token `tok` for a device with no endpoint yet, SNS answering with `answers`: the
    /// endpoint, and the actions called (with the endpoint each named).
    async fn register(answers: Vec<(u16, String)>) -> (Result<String, PushError>, Vec<String>) {
        let (config, calls) = crate::aws::standin::answering(answers);
        let sns = SnsPush::new(Client::new(&config));
        let registered =
            sns.register(EndpointRequest { application: APPLICATION, token: "tok", endpoint: None }).await;
        let decoded = |body: &String| body.replace("%3A", ":").replace("%2F", "/");
        let actions = calls
            .lock()
            .unwrap()
            .iter()
            .map(decoded)
            .map(|body| {
                let field = |name: &str| {
                    body.split('&').find_map(|kv| kv.strip_prefix(name)).unwrap_or_default().to_owned()
                };
                format!("{} {}", field("Action="), field("EndpointArn=")).trim_end().to_owned()
            })
            .collect();
        (registered, actions)
    }

    /// SNS keeps one endpoint per token in an application. A create for a token it already holds
    /// under other attributes is refused naming that endpoint: it is taken over, its token set
    /// and enabled. A create answered with an endpoint it held, disabled (after a failed
    /// delivery), is enabled; one answered with a new or enabled endpoint is left as it is. No
    /// emulator here keeps SNS's endpoints so: a stand-in on loopback answers for SNS.
    #[tokio::test]
    async fn a_token_sns_already_holds_gets_its_endpoint_back_enabled() {
        let message = format!(
            "Invalid parameter: Token Reason: Endpoint {HELD} already exists with the same Token, but different attributes."
        );
        let (registered, actions) = register(vec![refusal("InvalidParameter", &message), set()]).await;
        assert_eq!(registered.unwrap(), HELD);
        assert_eq!(actions, ["CreatePlatformEndpoint", &format!("SetEndpointAttributes {HELD}")]);

        let (registered, actions) = register(vec![created(HELD), attributes("false", "tok"), set()]).await;
        assert_eq!(registered.unwrap(), HELD);
        let get = format!("GetEndpointAttributes {HELD}");
        assert_eq!(actions, ["CreatePlatformEndpoint", &get, &format!("SetEndpointAttributes {HELD}")]);

        let (registered, actions) = register(vec![created(MADE), attributes("true", "tok")]).await;
        assert_eq!(registered.unwrap(), MADE);
        assert_eq!(actions, ["CreatePlatformEndpoint", &format!("GetEndpointAttributes {MADE}")]);

        // The endpoint went between its create and its read: made once more (twice: unavailable).
        let gone = || refusal("NotFound", "Endpoint does not exist");
        let (registered, actions) =
            register(vec![created(HELD), gone(), created(MADE), attributes("true", "tok")]).await;
        assert_eq!(registered.unwrap(), MADE);
        assert_eq!(
            actions,
            [
                "CreatePlatformEndpoint",
                &get,
                "CreatePlatformEndpoint",
                &format!("GetEndpointAttributes {MADE}")
            ]
        );
        let (registered, _) = register(vec![created(HELD), gone(), created(MADE), gone()]).await;
        assert!(matches!(registered, Err(PushError::Unavailable(_))), "{registered:?}");

        let (registered, _) = register(vec![refusal("InvalidParameter", "Invalid parameter: Token")]).await;
        assert!(matches!(registered, Err(PushError::Refused(_))), "{registered:?}");
    }

    /// A platform application SNS finds disabled, or does not find when asked to create an
    /// endpoint in it, is the app's missing application (a 400 naming `platform`), not SNS being
    /// unavailable; a disabled endpoint met by a wake-up is gone.
    #[tokio::test]
    async fn a_missing_or_disabled_application_is_told_apart() {
        let disabled = || refusal("PlatformApplicationDisabled", "Platform application is disabled");
        let (registered, _) = register(vec![disabled()]).await;
        assert!(matches!(registered, Err(PushError::NoApplication)), "{registered:?}");
        let (registered, _) = register(vec![refusal("NotFound", "PlatformApplication does not exist")]).await;
        assert!(matches!(registered, Err(PushError::NoApplication)), "{registered:?}");

        let wake = WakeUp { kind: WakeKind::Oob, id: "r-1".into() };
        let send = |answer: (u16, String)| {
            let (config, _) = crate::aws::standin::answering(vec![answer]);
            let wake = wake.clone();
            async move { SnsPush::new(Client::new(&config)).send(HELD, Platform::Apns, &wake).await }
        };
        let sent = send(disabled()).await;
        assert!(matches!(sent, Err(PushError::NoApplication)), "{sent:?}");
        let sent = send(refusal("EndpointDisabled", "Endpoint is disabled")).await;
        assert!(matches!(sent, Err(PushError::Gone)), "{sent:?}");
    }

    #[test]
    fn the_endpoint_a_refused_create_names_is_read_from_its_message() {
        let refused = |arn: &str| {
            format!("Invalid parameter: Token Reason: Endpoint {arn} already exists with the same Token, but different attributes.")
        };
        assert_eq!(existing_endpoint(&refused(HELD)), Some(HELD));
        let china = "arn:aws-cn:sns:cn-north-1:123456789012:endpoint/GCM/app/1";
        assert_eq!(existing_endpoint(&refused(china)), Some(china));
        assert_eq!(existing_endpoint("Invalid parameter: Token Reason: malformed"), None);
        assert_eq!(existing_endpoint(&format!("Endpoint {HELD} is disabled")), None);
    }

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
