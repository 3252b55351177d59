//! Waking a device (SNS mobile push): the app's platform applications, a device's push
//! registration, and what a wake-up says. A wake-up carries no secret and no transaction text:
//! only that there is something to fetch (its kind and id); the device fetches it with its token.

use super::time::EpochMillis;
use super::validate::FieldError;
use serde::{Deserialize, Serialize};

/// A push platform, as SNS names its platform applications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Platform {
    /// Apple Push Notification service.
    Apns,
    /// APNs' development environment.
    ApnsSandbox,
    /// Firebase Cloud Messaging (SNS's `GCM` platform).
    Fcm,
}

impl Platform {
    /// The key of this platform's payload in an SNS message of `MessageStructure=json`.
    pub fn sns_key(self) -> &'static str {
        match self {
            Platform::Apns => "APNS",
            Platform::ApnsSandbox => "APNS_SANDBOX",
            Platform::Fcm => "GCM",
        }
    }
}

/// The app's SNS platform applications (ARNs), one per platform it serves; in the app's
/// workstation settings as `push`. A device of a platform the app has none for cannot register
/// for push, and is reached by its long-poll alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushApplications {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apns: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apns_sandbox: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fcm: Option<String>,
}

impl PushApplications {
    pub fn for_platform(&self, platform: Platform) -> Option<&str> {
        match platform {
            Platform::Apns => self.apns.as_deref(),
            Platform::ApnsSandbox => self.apns_sandbox.as_deref(),
            Platform::Fcm => self.fcm.as_deref(),
        }
    }

    /// Each ARN names a platform application of its own platform.
    pub fn validate(&self) -> Result<(), FieldError> {
        for (field, arn, platform) in [
            ("apns", &self.apns, Platform::Apns),
            ("apnsSandbox", &self.apns_sandbox, Platform::ApnsSandbox),
            ("fcm", &self.fcm, Platform::Fcm),
        ] {
            if let Some(arn) = arn {
                application_arn(field, arn, platform)?;
            }
        }
        Ok(())
    }
}

/// `arn:<partition>:sns:<region>:<account>:app/<PLATFORM>/<name>`.
fn application_arn(field: &str, arn: &str, platform: Platform) -> Result<(), FieldError> {
    let wrong = || {
        FieldError::new(
            field,
            format!(
                "must be an SNS platform application ARN (arn:aws:sns:<region>:<account>:app/{}/<name>)",
                platform.sns_key()
            ),
        )
    };
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [prefix, partition, service, region, account, resource] = parts[..] else { return Err(wrong()) };
    let name = resource
        .strip_prefix("app/")
        .and_then(|r| r.strip_prefix(platform.sns_key()))
        .and_then(|r| r.strip_prefix('/'));
    let ok = prefix == "arn"
        && !partition.is_empty()
        && partition.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && service == "sns"
        && !region.is_empty()
        && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && account.len() == 12
        && account.bytes().all(|b| b.is_ascii_digit())
        && name.is_some_and(|n| {
            (1..=256).contains(&n.len())
                && n.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        });
    if ok {
        Ok(())
    } else {
        Err(wrong())
    }
}

/// A device's push token on its platform, checked: 1 to 4096 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushToken {
    pub platform: Platform,
    pub token: String,
}

impl PushToken {
    pub fn parse(platform: Platform, token: String) -> Result<Self, FieldError> {
        let ok = (1..=4096).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_graphic());
        if ok {
            Ok(Self { platform, token })
        } else {
            Err(FieldError::new("token", "must be 1 to 4096 printable ASCII characters"))
        }
    }
}

/// A device's push registration, kept with the device: the platform endpoint of its token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushRegistration {
    pub platform: Platform,
    /// The SNS platform endpoint's ARN (on the embedded backend, the recorder's id).
    pub endpoint: String,
    /// False once the platform said the endpoint is disabled or gone (the app was removed,
    /// the token expired); the device registers its token again to turn it back on.
    pub enabled: bool,
    pub updated_at: EpochMillis,
}

/// What a wake-up is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WakeKind {
    /// An OOB authentication is waiting: fetch `GET /rp/versioned/device/oob/requests`.
    Oob,
    /// A workstation's offline PINs are ready: `POST /rp/versioned/device/setup`.
    OfflineSetup,
    /// A login certificate was issued: `GET /rp/versioned/device/certificates`.
    Certificate,
}

/// A wake-up: its kind and the id of what to fetch, nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WakeUp {
    pub kind: WakeKind,
    pub id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_arns_name_their_platform() {
        let apps = PushApplications {
            apns: Some("arn:aws:sns:eu-west-1:123456789012:app/APNS/rp-phone".into()),
            apns_sandbox: None,
            fcm: Some("arn:aws-us-gov:sns:us-gov-west-1:123456789012:app/GCM/rp-phone".into()),
        };
        assert!(apps.validate().is_ok(), "any partition");
        assert_eq!(apps.for_platform(Platform::Fcm), apps.fcm.as_deref());
        for (field, bad) in [
            ("apns", "arn:aws:sns:eu-west-1:123456789012:app/GCM/rp-phone"),
            ("apns", "arn:aws:sqs:eu-west-1:123456789012:app/APNS/rp-phone"),
            ("apns", "arn:aws:sns:eu-west-1:1234:app/APNS/rp-phone"),
            ("apns", "arn:aws:sns:eu-west-1:123456789012:app/APNS/"),
            ("apns", "not an arn"),
        ] {
            let apps = PushApplications { apns: Some(bad.into()), ..Default::default() };
            assert_eq!(apps.validate().unwrap_err().field, field, "{bad}");
        }
    }

    #[test]
    fn a_wake_up_says_only_what_to_fetch() {
        let wake = WakeUp { kind: WakeKind::OfflineSetup, id: "m-1".into() };
        assert_eq!(
            serde_json::to_value(&wake).unwrap(),
            serde_json::json!({"kind": "offline-setup", "id": "m-1"})
        );
    }

    #[test]
    fn push_tokens_are_printable() {
        assert!(PushToken::parse(Platform::Apns, "a1b2".into()).is_ok());
        for bad in ["", "with space", "é"] {
            assert_eq!(PushToken::parse(Platform::Apns, bad.into()).unwrap_err().field, "token");
        }
    }
}
