//! Field-level validation shared by every request type.

/// A request field that failed validation; `field` is its JSON path (`offlineAccess.tokenCount`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }

    /// The same error, one level deeper (`tokenCount` under `offlineAccess`).
    pub fn under(self, parent: &str) -> Self {
        Self { field: format!("{parent}.{}", self.field), message: self.message }
    }
}

/// Whether `c` is whitespace or a line terminator to JavaScript (ECMA-262's `WhiteSpace` and
/// `LineTerminator`): what `\s` matches there, and so in a JSON Schema pattern. Not Rust's
/// `char::is_whitespace`, which also counts U+0085 (NEL) and leaves out U+FEFF.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}' | '\u{2028}' | '\u{2029}' | '\u{202F}' | '\u{205F}' | '\u{3000}' | '\u{FEFF}'
    )
}

/// A string of `min..=max` characters (Unicode scalar values), without control characters.
pub fn text(field: &str, value: &str, min: usize, max: usize) -> Result<(), FieldError> {
    let len = value.chars().count();
    if len < min {
        return Err(FieldError::new(
            field,
            if min == 1 {
                "must not be empty".to_owned()
            } else {
                format!("must be at least {min} characters")
            },
        ));
    }
    if len > max {
        return Err(FieldError::new(field, format!("must be at most {max} characters")));
    }
    if value.chars().any(is_refused_control) {
        return Err(FieldError::new(field, "must not contain control characters"));
    }
    Ok(())
}

/// The characters a text refuses: the C0 and C1 controls, but tab, line feed and carriage return.
const REFUSED_CONTROLS: [(char, char); 4] =
    [('\u{0}', '\u{8}'), ('\u{b}', '\u{c}'), ('\u{e}', '\u{1f}'), ('\u{7f}', '\u{9f}')];

fn is_refused_control(c: char) -> bool {
    REFUSED_CONTROLS.iter().any(|&(first, last)| (first..=last).contains(&c))
}

/// The document's pattern of what [`text`] accepts: no refused control character. The length
/// stays `minLength`/`maxLength`'s to say: a bounded repeat (`{0,5000}`) is more than some
/// validators' regex engines compile (schemathesis's refused a screen text's).
pub fn text_pattern() -> String {
    let refused: String = REFUSED_CONTROLS
        .iter()
        .map(|&(first, last)| format!("\\x{:02X}-\\x{:02X}", u32::from(first), u32::from(last)))
        .collect();
    format!("^[^{refused}]*$")
}

/// A path segment that must be a positive integer id (an id, a version), written as the API
/// writes it: digits without a sign or a leading zero, so one id has one path (`+1` and `01`
/// are not `1`).
pub fn positive_id(field: &str, text: &str) -> Result<i64, FieldError> {
    let canonical =
        text.starts_with(|c: char| ('1'..='9').contains(&c)) && text.bytes().all(|b| b.is_ascii_digit());
    match text.parse::<i64>() {
        Ok(n) if canonical => Ok(n),
        _ => Err(FieldError::new(
            field,
            "must be a positive integer, in digits without a sign or a leading zero",
        )),
    }
}

/// An integer within `min..=max`.
pub fn range(field: &str, value: i64, min: i64, max: i64) -> Result<(), FieldError> {
    if value < min || value > max {
        return Err(FieldError::new(field, format!("must be between {min} and {max}")));
    }
    Ok(())
}

/// An identifier: ASCII letter first, then letters, digits, `_`, `-` or `.`, 1 to `max` long.
pub fn identifier(field: &str, value: &str, max: usize) -> Result<(), FieldError> {
    let mut chars = value.chars();
    let ok_first = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let ok_rest = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if value.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if value.len() > max {
        return Err(FieldError::new(field, format!("must be at most {max} characters")));
    }
    if !ok_first || !ok_rest {
        return Err(FieldError::new(
            field,
            "must start with a letter and hold only letters, digits, '_', '-' or '.'",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_positive_id_has_one_spelling() {
        assert_eq!(positive_id("id", "1"), Ok(1));
        assert_eq!(positive_id("id", "907"), Ok(907));
        for bad in ["0", "01", "+1", "-1", "1.0", " 1", "", "99999999999999999999"] {
            assert!(positive_id("id", bad).is_err(), "{bad:?}");
        }
    }

    /// [`is_js_whitespace`] is what a JavaScript engine's `\s` matches (QuickJS, the sandbox's),
    /// over every Unicode scalar value.
    #[test]
    fn js_whitespace_is_what_javascript_calls_whitespace() {
        let runtime = rquickjs::Runtime::new().unwrap();
        let context = rquickjs::Context::full(&runtime).unwrap();
        let javascript: Vec<u32> = context.with(|ctx| {
            ctx.eval(
                "const out = []; for (let i = 0; i <= 0x10FFFF; i++) { \
                 if ((i < 0xD800 || i > 0xDFFF) && /\\s/.test(String.fromCodePoint(i))) out.push(i); } out",
            )
            .unwrap()
        });
        let ours: Vec<u32> = (0..=0x10FFFF)
            .filter_map(char::from_u32)
            .filter(|&c| is_js_whitespace(c))
            .map(u32::from)
            .collect();
        assert_eq!(ours, javascript);
        assert!(!is_js_whitespace('\u{85}') && '\u{85}'.is_whitespace());
    }

    #[test]
    fn text_bounds_count_characters_not_bytes() {
        assert!(text("f", "ééé", 1, 3).is_ok());
        assert_eq!(text("f", "", 1, 3).unwrap_err().message, "must not be empty");
        assert!(text("f", "abcd", 1, 3).unwrap_err().message.contains("at most 3"));
        assert!(text("f", "a\u{0}b", 1, 3).is_err());
    }

    #[test]
    fn a_text_refuses_the_control_characters_but_tab_and_line_ends() {
        for c in (0..0x300).filter_map(char::from_u32) {
            let allowed = !c.is_control() || matches!(c, '\t' | '\n' | '\r');
            assert_eq!(text("f", &c.to_string(), 1, 1).is_ok(), allowed, "U+{:04X}", u32::from(c));
        }
        assert_eq!(text_pattern(), r"^[^\x00-\x08\x0B-\x0C\x0E-\x1F\x7F-\x9F]*$");
    }

    #[test]
    fn identifiers_start_with_a_letter() {
        assert!(identifier("appId", "workstationDemo", 64).is_ok());
        assert!(identifier("appId", "9lives", 64).is_err());
        assert!(identifier("appId", "has space", 64).is_err());
        assert!(identifier("appId", &"a".repeat(64), 64).is_ok());
        assert!(identifier("appId", &"a".repeat(65), 64).is_err());
        assert!(identifier("appId", "", 64).is_err());
    }

    #[test]
    fn a_range_holds_both_its_ends() {
        for (value, ok) in [(0, false), (1, true), (5, true), (6, false)] {
            assert_eq!(
                range("lockoutSecs", value, 1, 5).map_err(|e| e.field),
                if ok { Ok(()) } else { Err("lockoutSecs".into()) }
            );
        }
    }

    #[test]
    fn nested_fields_keep_their_path() {
        let e = FieldError::new("tokenCount", "x").under("offlineAccess");
        assert_eq!(e.field, "offlineAccess.tokenCount");
    }
}
