//! Reads a body as its JSON Schema says, where serde reads it otherwise:
//! - serde's derived structs accept a JSON array as well as an object, its members taken by
//!   position: `[null, null]` is read as `{"expiresInSecs": null, "machineUserNameWS": null}`.
//!   The document allows an object only, so [`Strict`] reads every struct, at any depth, as a
//!   map: an array there is refused as a value of the wrong type;
//! - to JSON Schema, `664.0` and `6.64e2` are the integer 664, which serde refuses for an integer
//!   field. [`Strict`] hands on a number with no fraction as an integer (within ±2^53, where a
//!   float holds every integer exactly); `1.5` is still refused where an integer goes;
//! - serde's derived enums take a variant as an object's only member (`{"access": null}`) as
//!   well as its name; the document's enums are strings, so [`Strict`] reads an enum from a
//!   string only.
//!
//! Everything else is passed through unchanged; every value handed on (an option's content, a
//! list's items, a map's values) is wrapped again, so the rule holds all the way down.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// A deserializer whose structs come from objects only, and whose integers may be written as
/// floats with no fraction.
pub struct Strict<D>(pub D);

/// A visitor, seed or access of the deserializer below, wrapped so that what it hands on is
/// [`Strict`] too.
struct Wrap<T>(T);

macro_rules! forward_deserialize {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Wrap(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32
        deserialize_i64 deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32
        deserialize_u64 deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char
        deserialize_str deserialize_string deserialize_bytes deserialize_byte_buf
        deserialize_option deserialize_unit deserialize_seq deserialize_map
        deserialize_identifier deserialize_ignored_any
    }

    /// A struct is read as a map, which an array is not.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(Wrap(visitor))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, Wrap(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Wrap(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrap(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Wrap(visitor))
    }

    /// An enum is read from a string, its variant's name: the document's enums are strings
    /// (every one is of unit variants), where serde also takes `{"variant": null}`.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_str(Named(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty))*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.0.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(formatter)
    }

    forward_visit! {
        visit_bool(bool) visit_i8(i8) visit_i16(i16) visit_i32(i32) visit_i64(i64)
        visit_i128(i128) visit_u8(u8) visit_u16(u16) visit_u32(u32) visit_u64(u64)
        visit_u128(u128) visit_f32(f32) visit_char(char) visit_str(&str)
        visit_borrowed_str(&'de str) visit_string(String) visit_bytes(&[u8])
        visit_borrowed_bytes(&'de [u8]) visit_byte_buf(Vec<u8>)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
        match v {
            v if v.fract() != 0.0 || v.abs() >= EXACT => self.0.visit_f64(v),
            v if v >= 0.0 => self.0.visit_u64(v as u64),
            v => self.0.visit_i64(v as i64),
        }
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(Strict(deserializer))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Strict(deserializer))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(Wrap(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.0.visit_map(Wrap(map))
    }
}

/// The visitor of an enum, handed the variant a string names.
struct Named<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for Named<V> {
    type Value = V::Value;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(formatter)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.0.visit_enum(de::value::StrDeserializer::new(v))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Wrap<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(deserializer))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Wrap(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(Wrap(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Wrap(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::Strict;
    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Inner {
        a: u32,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Outer {
        name: String,
        inner: Option<Inner>,
        #[serde(default)]
        items: Vec<Inner>,
        any: Option<Value>,
    }

    fn strict<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        T::deserialize(Strict(&mut de)).map_err(|e| e.to_string())
    }

    #[test]
    fn objects_read_as_before_at_any_depth() {
        let text = r#"{"name": "n", "inner": {"a": 1}, "items": [{"a": 2}], "any": [1, {"b": null}]}"#;
        let plain: Outer = serde_json::from_str(text).unwrap();
        assert_eq!(strict::<Outer>(text).unwrap(), plain);
        assert_eq!(strict::<Outer>(r#"{"name": "n", "inner": null}"#).unwrap().inner, None);
        assert_eq!(strict::<Option<Inner>>("null").unwrap(), None);
        assert_eq!(strict::<Value>("[1, 2.5, \"x\", true]").unwrap(), serde_json::json!([1, 2.5, "x", true]));
    }

    #[test]
    fn an_array_is_no_struct_at_any_depth() {
        // Plain serde takes each of these, the members by position.
        assert!(serde_json::from_str::<Outer>(r#"["n", [1], [], null]"#).is_ok());
        for text in [r#"["n", null]"#, r#"{"name": "n", "inner": [1]}"#, r#"{"name": "n", "items": [[2]]}"#] {
            let err = strict::<Outer>(text).unwrap_err();
            assert!(err.contains("invalid type: sequence, expected struct"), "{text}: {err}");
        }
        assert!(strict::<Option<Inner>>("[1]").is_err());
    }

    #[test]
    fn a_number_with_no_fraction_is_an_integer() {
        for (text, a) in [("1.0", 1), ("6.64e2", 664), ("0.0", 0), ("4294967295.0", u32::MAX)] {
            assert_eq!(strict::<Inner>(&format!(r#"{{"a": {text}}}"#)).unwrap(), Inner { a }, "{text}");
        }
        assert_eq!(strict::<i64>("-3.0").unwrap(), -3);
        for text in ["1.5", "-1.0", "4294967296.0", "1e300"] {
            assert!(strict::<Inner>(&format!(r#"{{"a": {text}}}"#)).is_err(), "{text}");
        }
        // A float stays a float where one goes, and one past 2^53 is not taken for an integer.
        assert_eq!(strict::<f64>("2.5").unwrap(), 2.5);
        assert_eq!(strict::<f64>("2.0").unwrap(), 2.0);
        assert!(strict::<u64>("9007199254740992.0").is_err());
        assert_eq!(strict::<Value>("[1.0, 1.5]").unwrap(), serde_json::json!([1, 1.5]));
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Access,
        Admin,
    }

    #[test]
    fn an_enum_is_a_string_only() {
        assert_eq!(strict::<Kind>(r#""access""#).unwrap(), Kind::Access);
        assert_eq!(strict::<Vec<Kind>>(r#"["admin", "access"]"#).unwrap(), [Kind::Admin, Kind::Access]);
        // Plain serde takes the variant as an object's only member, too.
        assert_eq!(serde_json::from_str::<Kind>(r#"{"access": null}"#).unwrap(), Kind::Access);
        for text in [r#"{"access": null}"#, r#"{"access": []}"#, "1", "null", r#""root""#] {
            assert!(strict::<Kind>(text).is_err(), "{text}");
        }
        assert!(strict::<Kind>(r#"{"access": null}"#).unwrap_err().starts_with("invalid type: map"));
    }

    #[test]
    fn other_mismatches_are_refused_as_before() {
        for text in [r#"{"name": 1}"#, r#"{"name": "n", "inner": {"a": -1}}"#, r#"{"inner": {"a": 1}}"#] {
            let plain = serde_json::from_str::<Outer>(text).unwrap_err().to_string();
            assert_eq!(strict::<Outer>(text).unwrap_err(), plain, "{text}");
        }
    }
}

/// The path (`contentMap.login`, `items[2].name`) of the first member an object of the JSON
/// document `bytes` names twice, if any. serde keeps the last of two equal keys in a map (and a
/// `Value`) without a word, where a derived struct refuses them: this refuses them everywhere,
/// at any depth. A document that is not valid JSON yields `None` (the typed parse reports it).
pub fn duplicate_member(bytes: &[u8]) -> Option<String> {
    let found = std::cell::RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let _ = Unique { path: String::new(), found: &found }.deserialize(&mut de);
    found.into_inner()
}

struct Unique<'a> {
    path: String,
    found: &'a std::cell::RefCell<Option<String>>,
}

impl Unique<'_> {
    fn at(&self, member: &str) -> String {
        if self.path.is_empty() {
            member.to_owned()
        } else {
            format!("{}.{member}", self.path)
        }
    }
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Unique { path: format!("{}[{i}]", self.path), found: self.found })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = self.at(&key);
            if !seen.insert(key) {
                *self.found.borrow_mut() = Some(path);
                return Err(de::Error::custom("a member appears twice"));
            }
            map.next_value_seed(Unique { path, found: self.found })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod unique_tests {
    use super::duplicate_member;

    #[test]
    fn a_member_named_twice_is_found_at_any_depth() {
        assert_eq!(duplicate_member(br#"{"a": 1, "b": {"c": 2}}"#), None);
        assert_eq!(duplicate_member(br#"{"a": 1, "a": 2}"#).as_deref(), Some("a"));
        assert_eq!(
            duplicate_member(br#"{"m": {"x": {}, "y": [{"k": 1, "k": 2}]}}"#).as_deref(),
            Some("m.y[0].k")
        );
        assert_eq!(
            duplicate_member(br#"{"items": [{}, [1], {"name": 1, "name": 2}]}"#).as_deref(),
            Some("items[2].name"),
            "an item is named by its place"
        );
        assert_eq!(
            duplicate_member(br#"{"a\u0062": 1, "ab": 2}"#).as_deref(),
            Some("ab"),
            "escapes are read"
        );
        assert_eq!(duplicate_member(b"{not json"), None);
    }
}
