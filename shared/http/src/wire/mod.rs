//! Wire types: the request and response bodies with the seed's field names and the OpenAPI
//! derives, and the parses from them into the domain's checked commands (and back, for what a
//! response shows). The domain keeps no wire type; the type a handler parses is the type the
//! document shows.

pub mod apps;
pub mod certificates;
pub mod code;
pub mod devices;
pub mod enrollment;
pub mod oob;
pub mod pairing;

/// A wire enum that mirrors a domain enum variant for variant: its names on the wire and its
/// schema are said here, and it converts both ways.
macro_rules! mirror_enum {
    ($(#[$meta:meta])* pub enum $name:ident for $domain:ident { $($(#[$vmeta:meta])* $variant:ident),+ $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        $(#[$meta])*
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl From<$name> for $domain {
            fn from(value: $name) -> Self {
                match value {
                    $($name::$variant => $domain::$variant),+
                }
            }
        }

        impl From<$domain> for $name {
            fn from(value: $domain) -> Self {
                match value {
                    $($domain::$variant => $name::$variant),+
                }
            }
        }
    };
}
pub(crate) use mirror_enum;

/// Conversions both ways between a wire struct and the domain struct it mirrors field for
/// field (each field converting with `into`).
macro_rules! mirror_fields {
    ($wire:ty, $domain:ty { $($field:ident),+ $(,)? }) => {
        impl From<$domain> for $wire {
            #[allow(clippy::useless_conversion)]
            fn from(value: $domain) -> Self {
                Self { $($field: value.$field.into()),+ }
            }
        }

        impl From<$wire> for $domain {
            #[allow(clippy::useless_conversion)]
            fn from(value: $wire) -> Self {
                Self { $($field: value.$field.into()),+ }
            }
        }
    };
}
pub(crate) use mirror_fields;

/// Reads an optional member that may be left out but not sent as `null`:
/// `#[serde(default, deserialize_with = "wire::present")]`. Left out it is `None`; `null`
/// is refused as the type's own value would be (a 400 naming the member), where a plain
/// `Option` would take it for left out.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// The document's schema of what [`rp_domain::validate::text`] accepts with `min..=max`: a string of that length.
pub fn text_schema(min: usize, max: usize) -> utoipa::openapi::ObjectBuilder {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::String)
        .min_length((min > 0).then_some(min))
        .max_length(Some(max))
}

/// The document's schema of a list of `min_items..=max_items` texts of `1..=max_len` characters.
pub fn texts_schema(
    min_items: usize,
    max_items: usize,
    max_len: usize,
) -> utoipa::openapi::schema::ArrayBuilder {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(text_schema(1, max_len))
        .min_items((min_items > 0).then_some(min_items))
        .max_items(Some(max_items))
}

/// `kind` or null: the type of an optional field that may also be sent as `null`.
pub fn or_null(kind: utoipa::openapi::Type) -> utoipa::openapi::schema::SchemaType {
    utoipa::openapi::schema::SchemaType::from_iter([kind, utoipa::openapi::Type::Null])
}

/// The document's schema of a map of at most `max_entries` entries whose keys are texts of
/// `1..=max_key` characters, and whose values are `values`.
pub fn map_schema(
    max_entries: usize,
    max_key: usize,
    values: impl Into<utoipa::openapi::Schema>,
) -> utoipa::openapi::ObjectBuilder {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::Type::Object)
        .property_names(Some(text_schema(1, max_key)))
        .additional_properties(Some(values.into()))
        .max_properties(Some(max_entries))
}
