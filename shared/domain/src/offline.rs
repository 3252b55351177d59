//! Offline PIN access (workstation-api.md, "Offline authentication flow"; DECISIONS §5) as pure
//! functions. A pairing's offline set is created by its workstation (the access token that
//! created the pairing), handed to the paired device once, shrinks as PINs are used (reported by
//! either side, by the PIN's opaque id), and is locked after repeated wrong attempts.
//!
//! `tokens` is a list of `<id>:<pin>` entries separated by commas: the id (1–64 of letters,
//! digits, `.`, `_`, `-`) is the workstation's opaque name for the PIN, the PIN has exactly
//! `tokenLength` letters or digits, and a set holds 1 to `tokenCount` of them. PINs exist in the
//! clear only in memory; at rest the whole set is sealed, and only the ids are stored as such.

use super::apps::OfflineAccess;
use super::time::EpochMillis;
use super::validate::FieldError;
use crate::boundary::Sealed;
use serde::{Deserialize, Serialize};

/// One PIN: the id the workstation chose, and the PIN itself.
#[derive(Clone, PartialEq, Eq)]
pub struct Pin {
    pub id: String,
    pub pin: String,
}

impl std::fmt::Debug for Pin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pin({}, ..)", self.id)
    }
}

fn is_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Parses `tokens` against the app's settings; errors name `field`.
pub fn parse_pins(field: &str, tokens: &str, settings: &OfflineAccess) -> Result<Vec<Pin>, FieldError> {
    let mut pins: Vec<Pin> = Vec::new();
    for (i, entry) in tokens.split(',').enumerate() {
        let at = format!("{field}[{i}]");
        let (id, pin) = entry.split_once(':').ok_or_else(|| FieldError::new(&at, "must be '<id>:<pin>'"))?;
        if !is_id(id) {
            return Err(FieldError::new(at, "the id must be 1 to 64 letters, digits, '.', '_' or '-'"));
        }
        if pin.chars().count() != settings.token_length as usize
            || !pin.chars().all(|c| c.is_ascii_alphanumeric())
        {
            return Err(FieldError::new(
                at,
                format!("the PIN must be exactly {} letters or digits (tokenLength)", settings.token_length),
            ));
        }
        if pins.iter().any(|p| p.id == id) {
            return Err(FieldError::new(at, "the id appears twice"));
        }
        // An entered PIN must match exactly one PIN of the set (the seed's offline flow).
        if pins.iter().any(|p| p.pin == pin) {
            return Err(FieldError::new(at, "the PIN appears twice: an entered PIN must match exactly one"));
        }
        pins.push(Pin { id: id.to_owned(), pin: pin.to_owned() });
    }
    if pins.len() > settings.token_count as usize {
        return Err(FieldError::new(field, format!("at most {} PINs (tokenCount)", settings.token_count)));
    }
    Ok(pins)
}

/// The `tokens` string of `pins`.
pub fn render_pins(pins: &[Pin]) -> String {
    pins.iter().map(|p| format!("{}:{}", p.id, p.pin)).collect::<Vec<_>>().join(",")
}

/// Reads back what [`render_pins`] wrote, keeping only the PINs whose ids are still `remaining`.
pub fn read_pins(tokens: &str, remaining: &[String]) -> Vec<Pin> {
    tokens
        .split(',')
        .filter_map(|e| e.split_once(':'))
        .filter(|(id, _)| remaining.iter().any(|r| r == id))
        .map(|(id, pin)| Pin { id: id.to_owned(), pin: pin.to_owned() })
        .collect()
}

/// What is sealed: the PINs and their authorization code.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SealedTokens {
    pub tokens: String,
    pub tokens_auth: String,
}

/// A pairing's offline set: the sealed PINs and what may be known about them without opening it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfflineSet {
    pub sealed: Sealed,
    /// The ids of the PINs not used yet.
    pub remaining: Vec<String>,
    /// How many PINs the set had when issued.
    pub issued_count: u32,
    pub issued_at: EpochMillis,
    /// After this the set is no longer handed out or shown (`offlineAccessDays`).
    pub valid_until: EpochMillis,
    /// When the device fetched it; a set is handed to the device once.
    pub delivered_at: Option<EpochMillis>,
}

impl OfflineSet {
    pub fn new(sealed: Sealed, pins: &[Pin], settings: &OfflineAccess, now: EpochMillis) -> Self {
        Self {
            sealed,
            remaining: pins.iter().map(|p| p.id.clone()).collect(),
            issued_count: pins.len() as u32,
            issued_at: now,
            valid_until: now.plus_secs(settings.offline_access_days * 24 * 3600),
            delivered_at: None,
        }
    }

    pub fn used(&self) -> u32 {
        self.issued_count.saturating_sub(self.remaining.len() as u32)
    }

    pub fn is_valid(&self, now: EpochMillis) -> bool {
        now < self.valid_until && !self.remaining.is_empty()
    }

    /// Whether offline login works with the set at `now`: the device has fetched it, and it is
    /// still valid.
    pub fn is_active(&self, now: EpochMillis) -> bool {
        self.delivered_at.is_some() && self.is_valid(now)
    }

    /// Used PINs at or above `tokenLowWarningThresholdPercentage` of `tokenCount`: time to renew.
    pub fn low_token_warning(&self, settings: &OfflineAccess) -> bool {
        let threshold = settings.token_count * settings.token_low_warning_threshold_percentage;
        i64::from(self.used()) * 100 >= threshold
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfflineError {
    #[error(
        "offline access is disabled for this app; an admin enables it in the app's workstation settings"
    )]
    Disabled,
    #[error("only the workstation that created the pairing may do this")]
    NotOwner,
    #[error("offline access of this pairing is locked after repeated wrong attempts")]
    Locked { until: EpochMillis },
    #[error("the pairing has no offline PINs")]
    NoSet,
    #[error("the offline PINs were handed to the device already, or have expired")]
    Delivered,
    #[error("tokenId: the PIN '{0}' was used already or is unknown")]
    PinGone(String),
}

/// The lock state of a pairing's offline access.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfflineLock {
    pub locked_until: Option<EpochMillis>,
}

impl OfflineLock {
    /// When the lock ends, while it holds at `now`: it is over at its time.
    pub fn in_force(&self, now: EpochMillis) -> Option<EpochMillis> {
        self.locked_until.filter(|until| now < *until)
    }

    pub fn check(&self, now: EpochMillis) -> Result<(), OfflineError> {
        match self.in_force(now) {
            Some(until) => Err(OfflineError::Locked { until }),
            None => Ok(()),
        }
    }
}

/// The offline calls need offline access enabled.
pub fn require_enabled(settings: &OfflineAccess) -> Result<(), OfflineError> {
    if settings.enabled {
        Ok(())
    } else {
        Err(OfflineError::Disabled)
    }
}

/// [`OfflineError::PinGone`] for the first of `used` that `set` no longer holds. The set's ids are
/// kept in the clear, so a repeated report is refused before anything is opened.
pub fn check_unused(set: &OfflineSet, used: &[String]) -> Result<(), OfflineError> {
    match used.iter().find(|id| !set.remaining.contains(id)) {
        Some(gone) => Err(OfflineError::PinGone(gone.clone())),
        None => Ok(()),
    }
}

/// Removes used PINs from `pins` (opened from `set`); [`OfflineError::PinGone`] if one is not
/// in the set any more. Returns the PINs left.
pub fn remove_used(set: &OfflineSet, pins: Vec<Pin>, used: &[String]) -> Result<Vec<Pin>, OfflineError> {
    check_unused(set, used)?;
    Ok(pins.into_iter().filter(|p| set.remaining.contains(&p.id) && !used.contains(&p.id)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn settings() -> OfflineAccess {
        OfflineAccess { enabled: true, token_length: 6, token_count: 10, ..OfflineAccess::default() }
    }

    #[test]
    fn pins_parse_against_the_settings() {
        let pins = parse_pins("offline.tokens", "a1:123456,a2:abcdef", &settings()).unwrap();
        assert_eq!(render_pins(&pins), "a1:123456,a2:abcdef");
        let err = |t: &str| parse_pins("offline.tokens", t, &settings()).unwrap_err().field;
        assert_eq!(err("123456"), "offline.tokens[0]");
        assert_eq!(err("a1:12345"), "offline.tokens[0]", "tokenLength");
        assert_eq!(err("a1:123456,a1:654321"), "offline.tokens[1]", "ids are unique");
        assert_eq!(err("a1:123456,b1:123456"), "offline.tokens[1]", "PINs are unique");
        assert_eq!(err("a b:123456"), "offline.tokens[0]");
        let eleven = (0..11).map(|i| format!("p{i}:{i:06}")).collect::<Vec<_>>().join(",");
        assert_eq!(err(&eleven), "offline.tokens", "tokenCount");
        assert_eq!(format!("{:?}", pins[0]), "Pin(a1, ..)", "Debug never shows a PIN");
    }

    #[test]
    fn a_lock_holds_until_its_time_and_disabled_access_is_refused() {
        let until = EpochMillis(10_000);
        let locked = OfflineLock { locked_until: Some(until) };
        assert_eq!(locked.check(EpochMillis(9_999)), Err(OfflineError::Locked { until }));
        assert_eq!(locked.check(until), Ok(()), "over at its time");
        assert_eq!((locked.in_force(EpochMillis(9_999)), locked.in_force(until)), (Some(until), None));
        assert_eq!(OfflineLock::default().check(EpochMillis(0)), Ok(()));
        assert_eq!(require_enabled(&settings()), Ok(()));
        let disabled = OfflineAccess { enabled: false, ..settings() };
        assert_eq!(require_enabled(&disabled), Err(OfflineError::Disabled));
    }

    #[test]
    fn used_pins_leave_the_set_once() {
        let pins = parse_pins("t", "a:111111,b:222222,c:333333", &settings()).unwrap();
        let sealed = Sealed { wrapped_key: vec![], nonce: vec![], ciphertext: vec![] };
        let mut set = OfflineSet::new(sealed, &pins, &settings(), EpochMillis(0));
        let left = remove_used(&set, pins.clone(), &["b".into()]).unwrap();
        assert_eq!(render_pins(&left), "a:111111,c:333333");
        set.remaining = left.iter().map(|p| p.id.clone()).collect();
        assert_eq!(set.used(), 1);
        assert_eq!(remove_used(&set, left, &["b".into()]), Err(OfflineError::PinGone("b".into())));
        // Told from the ids alone, before the set is opened: the first one gone is named.
        assert_eq!(check_unused(&set, &["a".into(), "c".into()]), Ok(()));
        assert_eq!(
            check_unused(&set, &["a".into(), "b".into(), "x".into()]),
            Err(OfflineError::PinGone("b".into()))
        );
    }

    #[test]
    fn reading_a_sealed_set_keeps_only_the_remaining_pins() {
        let read = read_pins("a:111111,b:222222,c:333333", &["c".into(), "a".into()]);
        assert_eq!(render_pins(&read), "a:111111,c:333333");
        assert!(read_pins("a:111111", &[]).is_empty());
    }

    #[test]
    fn the_low_token_warning_starts_at_the_threshold() {
        let s = OfflineAccess { token_count: 10, token_low_warning_threshold_percentage: 20, ..settings() };
        let pins =
            parse_pins("t", &(0..10).map(|i| format!("p{i}:{i:06}")).collect::<Vec<_>>().join(","), &s)
                .unwrap();
        let sealed = Sealed { wrapped_key: vec![], nonce: vec![], ciphertext: vec![] };
        let mut set = OfflineSet::new(sealed, &pins, &s, EpochMillis(0));
        set.remaining.truncate(9);
        assert!(!set.low_token_warning(&s), "1 of 10 used: 10%");
        set.remaining.truncate(8);
        assert!(set.low_token_warning(&s), "2 of 10 used: 20%");
        assert!(set.is_valid(EpochMillis(0)));
        assert!(!set.is_valid(set.valid_until), "offlineAccessDays bound it");
    }

    #[test]
    fn a_set_is_active_once_fetched_while_it_is_valid() {
        let pins = parse_pins("t", "a:111111", &settings()).unwrap();
        let sealed = Sealed { wrapped_key: vec![], nonce: vec![], ciphertext: vec![] };
        let mut set = OfflineSet::new(sealed, &pins, &settings(), EpochMillis(0));
        assert!(!set.is_active(EpochMillis(1)), "not fetched yet");
        set.delivered_at = Some(EpochMillis(1));
        assert!(set.is_active(EpochMillis(1)));
        assert!(!set.is_active(set.valid_until), "no longer valid");
        set.remaining.clear();
        assert!(!set.is_active(EpochMillis(1)), "every PIN used");
    }

    proptest! {
        #[test]
        fn rendered_sets_parse_back(ids in proptest::collection::btree_set("[a-z0-9]{1,8}", 1..10)) {
            let pins: Vec<Pin> =
                ids.iter().enumerate().map(|(i, id)| Pin { id: id.clone(), pin: format!("{i:06}") }).collect();
            prop_assert_eq!(parse_pins("t", &render_pins(&pins), &settings()).unwrap(), pins);
        }
    }
}
