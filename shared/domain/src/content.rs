//! Content customizations (content-customization-api.md, DECISIONS §7): named sets of screen
//! texts. Bodies are validated field by field with the JSON path of the first fault
//! (`contentMap.otpScreen.cardHeader.title`); a patch may use `null` to remove, a full map may not.

use super::time::EpochMillis;
use super::validate::{self, FieldError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A content customization as stored: one tenant's, under a per-tenant id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContentRecord {
    pub id: i64,
    pub display_name: String,
    pub description: Option<String>,
    pub content_map: Value,
    pub created_at: EpochMillis,
    pub updated_at: EpochMillis,
    /// Set from the store's item version when read; not stored.
    #[serde(skip)]
    pub version: u64,
}

impl ContentRecord {
    /// The customization after `patch`; the merged map must still be a valid whole map.
    pub fn patched(&self, patch: &ContentPatch) -> Result<ContentRecord, FieldError> {
        let mut next = self.clone();
        if let Some(name) = &patch.display_name {
            next.display_name = name.clone();
        }
        match &patch.description {
            DescriptionChange::Keep => {}
            DescriptionChange::Clear => next.description = None,
            DescriptionChange::Set(text) => next.description = Some(text.clone()),
        }
        if let Some(map_patch) = &patch.content_map {
            next.content_map = merge_content_map(&self.content_map, map_patch);
            validate_content_map(&next.content_map, Mode::Whole)?;
        }
        Ok(next)
    }

    /// The record if it stays within [`MAX_RECORD_BYTES`].
    pub fn within_size(self) -> Result<ContentRecord, ContentError> {
        let bytes = serde_json::to_vec(&self).map(|v| v.len()).unwrap_or(usize::MAX);
        if bytes > MAX_RECORD_BYTES {
            return Err(ContentError::TooLarge { bytes });
        }
        Ok(self)
    }

    /// The current customization with an earlier version's texts, as a new version.
    pub fn restored_from(&self, earlier: &ContentRecord) -> ContentRecord {
        ContentRecord {
            display_name: earlier.display_name.clone(),
            description: earlier.description.clone(),
            content_map: earlier.content_map.clone(),
            ..self.clone()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ContentError {
    #[error("id: no content customization {0}")]
    NotFound(i64),
    #[error("version: content customization {id} has no earlier version {version}")]
    VersionNotFound { id: i64, version: u64 },
    #[error("contentMap: the customization would take {bytes} bytes; at most {MAX_RECORD_BYTES} are kept")]
    TooLarge { bytes: usize },
    #[error("Idempotency-Key: the key was sent with another request within the last day")]
    KeyReused,
    /// A bad field, or a failure of the store, the key service or the queue.
    #[error(transparent)]
    Failed(#[from] crate::boundary::Failure),
}

crate::shares_failures!(ContentError);

/// The twelve screens a content map may hold.
pub const SCREENS: [&str; 12] = [
    "consentScreen",
    "instructionsScreen",
    "loginIdentifierScreen",
    "phoneNumberOrEmailScreen",
    "otpScreen",
    "locationScreen",
    "idvAwaitScreen",
    "idvRequestorReportScreen",
    "documentLivenessScreen",
    "autoApprovalAwaitScreen",
    "outcomeScreen",
    "deniedScreen",
];

/// The card parts of a screen and their text fields; `buttonLabels` is a free string map.
pub const PARTS: [(&str, [&str; 2]); 3] = [
    ("cardHeader", ["title", "description"]),
    ("cardContent", ["mainContent", "extraContent"]),
    ("cardFooter", ["caption1", "caption2"]),
];

pub const MAX_TEXT: usize = 5000;
pub const MAX_DISPLAY_NAME: usize = 255;
pub const MAX_DESCRIPTION: usize = 2000;
pub const MAX_BUTTON_KEY: usize = 64;
/// Largest a customization may grow, as stored (JSON bytes): well under DynamoDB's 400 KB item
/// limit, which an update that keeps adding `buttonLabels` would otherwise reach.
pub const MAX_RECORD_BYTES: usize = 100 * 1024;

/// Whether `null` is allowed (a merge patch) or not (a whole content map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Whole,
    Patch,
}

fn object<'v>(value: &'v Value, path: &str) -> Result<&'v Map<String, Value>, FieldError> {
    value.as_object().ok_or_else(|| FieldError::new(path, "must be an object"))
}

fn nullable(value: &Value, path: &str, mode: Mode) -> Result<bool, FieldError> {
    match (value.is_null(), mode) {
        (true, Mode::Patch) => Ok(true),
        (true, Mode::Whole) => Err(FieldError::new(path, "must not be null")),
        (false, _) => Ok(false),
    }
}

fn text(value: &Value, path: &str, mode: Mode) -> Result<(), FieldError> {
    if nullable(value, path, mode)? {
        return Ok(());
    }
    let text = value.as_str().ok_or_else(|| FieldError::new(path, "must be a string"))?;
    validate::text(path, text, 0, MAX_TEXT)
}

/// Validates a content map (or a merge patch of one).
pub fn validate_content_map(value: &Value, mode: Mode) -> Result<(), FieldError> {
    let root = "contentMap";
    for (screen, body) in object(value, root)? {
        let path = format!("{root}.{screen}");
        if !SCREENS.contains(&screen.as_str()) {
            return Err(FieldError::new(path, "is not a known screen"));
        }
        if nullable(body, &path, mode)? {
            continue;
        }
        for (part, fields) in object(body, &path)? {
            let part_path = format!("{path}.{part}");
            if nullable(fields, &part_path, mode)? {
                continue;
            }
            let fields_obj = object(fields, &part_path)?;
            if part == "buttonLabels" {
                for (key, label) in fields_obj {
                    let key_path = format!("{part_path}.{key}");
                    validate::text(&key_path, key, 1, MAX_BUTTON_KEY)?;
                    text(label, &key_path, mode)?;
                }
                continue;
            }
            let Some((_, allowed)) = PARTS.iter().find(|(name, _)| name == part) else {
                return Err(FieldError::new(part_path, "is not a known part of a screen"));
            };
            for (field, value) in fields_obj {
                let field_path = format!("{part_path}.{field}");
                if !allowed.contains(&field.as_str()) {
                    return Err(FieldError::new(field_path, "is not a known field"));
                }
                text(value, &field_path, mode)?;
            }
        }
    }
    Ok(())
}

/// A validated create body.
#[derive(Debug, Clone, PartialEq)]
pub struct NewContent {
    pub display_name: String,
    pub description: Option<String>,
    pub content_map: Value,
}

impl NewContent {
    /// The customization as first stored under `id`: version 1, created and updated `now`.
    pub fn record(&self, id: i64, now: EpochMillis) -> ContentRecord {
        ContentRecord {
            id,
            display_name: self.display_name.clone(),
            description: self.description.clone(),
            content_map: self.content_map.clone(),
            created_at: now,
            updated_at: now,
            version: 1,
        }
    }
}

/// What an update does to `description`.
#[derive(Debug, Clone, PartialEq)]
pub enum DescriptionChange {
    Keep,
    Clear,
    Set(String),
}

/// A validated update body: omitted fields keep their values.
#[derive(Debug, Clone, PartialEq)]
pub struct ContentPatch {
    pub display_name: Option<String>,
    pub description: DescriptionChange,
    pub content_map: Option<Value>,
}

fn display_name(value: &Value) -> Result<String, FieldError> {
    let name = value.as_str().ok_or_else(|| FieldError::new("displayName", "must be a string"))?;
    validate::text("displayName", name, 1, MAX_DISPLAY_NAME)?;
    Ok(name.to_owned())
}

fn description(value: &str) -> Result<String, FieldError> {
    validate::text("description", value, 0, MAX_DESCRIPTION)?;
    Ok(value.to_owned())
}

/// A create body's fields, as sent (`None` when left out, `Some(Null)` when sent as `null`).
pub fn parse_create(
    display_name: Option<&Value>,
    description: Option<&Value>,
    content_map: Option<&Value>,
) -> Result<NewContent, FieldError> {
    let display_name = match display_name {
        None | Some(Value::Null) => return Err(FieldError::new("displayName", "is required")),
        Some(v) => self::display_name(v)?,
    };
    let description = match description {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(self::description(s)?),
        Some(_) => return Err(FieldError::new("description", "must be a string")),
    };
    let content_map = match content_map {
        None => Value::Object(Map::new()),
        Some(v) => {
            validate_content_map(v, Mode::Whole)?;
            v.clone()
        }
    };
    Ok(NewContent { display_name, description, content_map })
}

/// An update body's fields, as sent: at least one given.
pub fn parse_patch(
    display_name: Option<&Value>,
    description: Option<&Value>,
    content_map: Option<&Value>,
) -> Result<ContentPatch, FieldError> {
    if display_name.is_none() && description.is_none() && content_map.is_none() {
        return Err(FieldError::new(
            "body",
            "an update must give at least one of displayName, description, contentMap",
        ));
    }
    let display_name = match display_name {
        None => None,
        Some(Value::Null) => return Err(FieldError::new("displayName", "must not be null")),
        Some(v) => Some(self::display_name(v)?),
    };
    let description = match description {
        None => DescriptionChange::Keep,
        Some(Value::Null) => DescriptionChange::Clear,
        Some(Value::String(s)) => DescriptionChange::Set(self::description(s)?),
        Some(_) => return Err(FieldError::new("description", "must be a string or null")),
    };
    let content_map = match content_map {
        None => None,
        Some(v) => {
            validate_content_map(v, Mode::Patch)?;
            Some(v.clone())
        }
    };
    Ok(ContentPatch { display_name, description, content_map })
}

/// Applies an RFC 7396 JSON Merge Patch to a content map.
pub fn merge_content_map(current: &Value, patch: &Value) -> Value {
    let mut merged = current.clone();
    json_patch::merge(&mut merged, patch);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(result: Result<impl std::fmt::Debug, FieldError>) -> String {
        result.unwrap_err().field
    }

    #[test]
    fn whole_maps_are_checked_down_to_the_field() {
        let ok = json!({"otpScreen": {"cardHeader": {"title": "Code"}, "buttonLabels": {"continue": "Go"}}});
        assert!(validate_content_map(&ok, Mode::Whole).is_ok());
        let cases = [
            (json!({"fooScreen": {}}), "contentMap.fooScreen"),
            (json!({"otpScreen": []}), "contentMap.otpScreen"),
            (json!({"otpScreen": {"cardBody": {}}}), "contentMap.otpScreen.cardBody"),
            (
                json!({"otpScreen": {"cardHeader": {"subtitle": "x"}}}),
                "contentMap.otpScreen.cardHeader.subtitle",
            ),
            (json!({"otpScreen": {"cardHeader": {"title": 5}}}), "contentMap.otpScreen.cardHeader.title"),
            (json!({"otpScreen": {"cardHeader": {"title": null}}}), "contentMap.otpScreen.cardHeader.title"),
            (
                json!({"otpScreen": {"cardFooter": {"caption1": "x".repeat(5001)}}}),
                "contentMap.otpScreen.cardFooter.caption1",
            ),
            (
                json!({"consentScreen": {"buttonLabels": {"k".repeat(65): "x"}}}),
                &format!("contentMap.consentScreen.buttonLabels.{}", "k".repeat(65)),
            ),
            (
                json!({"consentScreen": {"buttonLabels": {"accept": 1}}}),
                "contentMap.consentScreen.buttonLabels.accept",
            ),
            (
                json!({"consentScreen": {"buttonLabels": {"ok\u{9b}": "x"}}}),
                "contentMap.consentScreen.buttonLabels.ok\u{9b}",
            ),
            (json!([1]), "contentMap"),
        ];
        for (map, path) in cases {
            assert_eq!(field(validate_content_map(&map, Mode::Whole)), path, "{map}");
        }
    }

    #[test]
    fn patches_may_remove_with_null() {
        let patch = json!({"otpScreen": null, "consentScreen": {"cardHeader": {"title": null}, "buttonLabels": {"accept": null}}});
        assert!(validate_content_map(&patch, Mode::Patch).is_ok());
        assert!(validate_content_map(&patch, Mode::Whole).is_err());
    }

    fn parse_create(body: &Value) -> Result<NewContent, FieldError> {
        super::parse_create(body.get("displayName"), body.get("description"), body.get("contentMap"))
    }

    fn parse_patch(body: &Value) -> Result<ContentPatch, FieldError> {
        super::parse_patch(body.get("displayName"), body.get("description"), body.get("contentMap"))
    }

    #[test]
    fn create_and_patch_bodies() {
        assert_eq!(field(parse_create(&json!({}))), "displayName");
        assert_eq!(field(parse_create(&json!({"displayName": ""}))), "displayName");
        assert_eq!(
            field(parse_create(&json!({"displayName": "x", "description": "d".repeat(2001)}))),
            "description"
        );
        let created = parse_create(&json!({"displayName": "x"})).unwrap();
        assert_eq!((created.description, created.content_map), (None, json!({})));
        assert_eq!(field(parse_patch(&json!({}))), "body");
        assert_eq!(field(parse_patch(&json!({"displayName": null}))), "displayName");
        assert_eq!(parse_patch(&json!({"description": null})).unwrap().description, DescriptionChange::Clear);
        assert_eq!(field(parse_patch(&json!({"contentMap": null}))), "contentMap");
    }

    #[test]
    fn a_record_is_kept_up_to_its_size_and_refused_a_byte_past_it() {
        let with_description = |len: usize| ContentRecord {
            description: Some("d".repeat(len)),
            ..NewContent { display_name: "x".into(), description: None, content_map: json!({}) }
                .record(1, EpochMillis(1))
        };
        let bare = serde_json::to_vec(&with_description(0)).unwrap().len();
        let at_bound = with_description(MAX_RECORD_BYTES - bare);
        assert_eq!(at_bound.clone().within_size().unwrap(), at_bound);
        let past = with_description(MAX_RECORD_BYTES - bare + 1).within_size();
        assert!(matches!(past, Err(ContentError::TooLarge { bytes }) if bytes == MAX_RECORD_BYTES + 1));
    }

    #[test]
    fn a_restore_takes_the_earlier_texts_and_keeps_the_identity() {
        let current = ContentRecord {
            version: 3,
            updated_at: EpochMillis(30),
            ..NewContent { display_name: "now".into(), description: None, content_map: json!({}) }
                .record(7, EpochMillis(10))
        };
        let earlier = ContentRecord {
            id: 99,
            display_name: "then".into(),
            description: Some("old".into()),
            content_map: json!({"otpScreen": {"cardHeader": {"title": "T"}}}),
            created_at: EpochMillis(1),
            updated_at: EpochMillis(20),
            version: 1,
        };
        let restored = current.restored_from(&earlier);
        assert_eq!(
            restored,
            ContentRecord {
                display_name: earlier.display_name,
                description: earlier.description,
                content_map: earlier.content_map,
                ..current
            }
        );
    }

    #[test]
    fn merge_follows_rfc_7396() {
        let current = json!({"otpScreen": {"cardHeader": {"title": "A", "description": "B"}}, "deniedScreen": {"cardFooter": {"caption1": "C"}}});
        let patch = json!({"otpScreen": {"cardHeader": {"title": "A2", "description": null}}, "deniedScreen": null, "outcomeScreen": {"cardContent": {"mainContent": "M"}}});
        assert_eq!(
            merge_content_map(&current, &patch),
            json!({"otpScreen": {"cardHeader": {"title": "A2"}}, "outcomeScreen": {"cardContent": {"mainContent": "M"}}})
        );
    }
}
