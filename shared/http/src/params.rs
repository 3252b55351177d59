//! Wire types more than one area reads or answers with: the path and query parameters of the
//! lists and customizations, and the seed's `status` object.

use crate::extract::ApiPath;
use crate::problem::Problem;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use rp_domain::validate::positive_id;
use rp_domain::FieldError;
use rp_ports::{Cursor, Query};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// `{appId}` in a path, as [`AppId::parse`](rp_domain::apps::AppId::parse) checks it.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct AppIdPath {
    #[param(rename = "appId", pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub app_id: String,
}

/// `{appId}` and `{namedUser}` in a path; the user as
/// [`devices::named_user`](rp_domain::devices::named_user) checks it: the pattern is
/// `devices::NAMED_USER_PATTERN`, which a literal must repeat here (utoipa's `schema_with` would
/// drop the parameter's `required`); `every_identifier_a_request_names_has_the_pattern_the_api_checks`
/// holds the two equal.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct UserPath {
    #[param(rename = "appId", pattern = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$")]
    pub app_id: String,
    #[param(
        rename = "namedUser",
        min_length = 1,
        max_length = 255,
        pattern = r"^[^\s\uFEFF#/\x00-\x08\x0B-\x0C\x0E-\x1F\x7F-\x9F]([^#/\x00-\x08\x0B-\x0C\x0E-\x1F\x7F-\x9F]*[^\s\uFEFF#/\x00-\x08\x0B-\x0C\x0E-\x1F\x7F-\x9F])?$"
    )]
    pub named_user: String,
}

/// `{id}` of a content or code customization in a path, read as text and checked by
/// `validate::positive_id` (one spelling per id: no sign, no leading zero).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct IdPath {
    #[param(value_type = i64, minimum = 1)]
    pub id: String,
}

/// Path parameters that are checked as they are extracted ([`Checked`]).
pub trait CheckedPath: DeserializeOwned + Send {
    /// What the check yields.
    type Checked;
    fn check(self) -> Result<Self::Checked, FieldError>;
}

/// Path parameters `P`, checked: a bad one is a 400 naming it.
pub struct Checked<P: CheckedPath>(pub P::Checked);

impl<P: CheckedPath, S: Send + Sync> FromRequestParts<S> for Checked<P> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        let ApiPath(path) = ApiPath::<P>::from_request_parts(parts, state).await?;
        Ok(Checked(path.check()?))
    }
}

/// A customization's `{id}`, checked.
pub type ItemId = Checked<IdPath>;
/// An earlier version's `{id}` and `{version}`, checked.
pub type ItemVersion = Checked<VersionPath>;

impl CheckedPath for IdPath {
    type Checked = i64;
    fn check(self) -> Result<i64, FieldError> {
        positive_id("id", &self.id)
    }
}

impl CheckedPath for VersionPath {
    /// The customization's id, and the version.
    type Checked = (i64, u64);
    fn check(self) -> Result<(i64, u64), FieldError> {
        Ok((positive_id("id", &self.id)?, positive_id("version", &self.version)? as u64))
    }
}

/// `{id}` and `{version}` of an earlier version of a customization in a path, checked as
/// [`IdPath`]'s.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct VersionPath {
    #[param(value_type = i64, minimum = 1)]
    pub id: String,
    #[param(value_type = i64, minimum = 1)]
    pub version: String,
}

/// `?limit=&cursor=` of every list.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Page size, 1 to 200 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    pub limit: Option<String>,
    /// The `nextCursor` of the page before.
    #[param(min_length = 1, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
}

pub const DEFAULT_PAGE: usize = 50;

pub const MAX_PAGE: usize = 200;

impl ListParams {
    /// The page size and the decoded cursor, checked against the partition `query` reads.
    pub fn page(&self, query: &Query) -> Result<(usize, Option<Cursor>), FieldError> {
        self.page_of(|text| Cursor::decode(text).filter(|c| c.belongs_to(query)))
    }

    /// The page size and the cursor `decode` accepts (`None` for one this list did not give
    /// out).
    pub fn page_of<C>(
        &self,
        decode: impl FnOnce(&str) -> Option<C>,
    ) -> Result<(usize, Option<C>), FieldError> {
        let limit = match &self.limit {
            None => DEFAULT_PAGE,
            Some(text) => match text.parse::<usize>() {
                Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
                _ => {
                    return Err(FieldError::new("limit", format!("must be an integer from 1 to {MAX_PAGE}")))
                }
            },
        };
        let cursor = match self.cursor.as_deref().map(decode) {
            None => None,
            Some(Some(cursor)) => Some(cursor),
            Some(None) => return Err(FieldError::new("cursor", "is not a cursor returned by this list")),
        };
        Ok((limit, cursor))
    }
}

/// The seed's `status` object.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub response_code: u16,
    pub response_message: String,
}

impl Status {
    pub fn ok(message: &str) -> Self {
        Self { response_code: 200, response_message: message.to_owned() }
    }
}

/// The `Idempotency-Key` request header of a create: optional; as
/// [`IdempotencyKey::parse`](rp_domain::idempotency::IdempotencyKey::parse) checks it (a bad one
/// is a 400 naming the header). Documented by [`IdempotencyKeyHeader`].
pub struct OnceKey(pub Option<rp_domain::idempotency::IdempotencyKey>);

impl<S: Send + Sync> FromRequestParts<S> for OnceKey {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Problem> {
        use rp_domain::idempotency::{IdempotencyKey, HEADER};
        let Some(value) = parts.headers.get(HEADER) else { return Ok(OnceKey(None)) };
        let text = value.to_str().map_err(|_| FieldError::new(HEADER, "must be visible ASCII"))?;
        Ok(OnceKey(Some(IdempotencyKey::parse(text)?)))
    }
}

/// The `Idempotency-Key` header, as the OpenAPI document shows it ([`OnceKey`] reads it).
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKeyHeader {
    /// A key of the client's choosing for this create: sent again with the same request within
    /// a day, the create answers with what the first made and makes nothing; with another
    /// request, 422. Quoted (`"…"`, as the IETF draft writes it) or bare.
    #[param(
        rename = "Idempotency-Key",
        nullable = false,
        pattern = r#"^([!#-\[\]-~]{1,255}|"[!#-\[\]-~]{1,255}")$"#
    )]
    pub idempotency_key: Option<String>,
}
