//! The domain: newtypes that can only be built by parsing, records and their rules. No AWS here.

pub mod apps;
pub mod content;
pub mod devices;
pub mod envelope;
pub mod time;
pub mod tokens;
pub mod validate;

pub use validate::FieldError;
