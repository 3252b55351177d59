//! The audit events: filtered by name, app and time, counted on a timeline drawn as SVG here.

use super::auth::{Global, PageQuery};
use super::view::{self, when, Page, Refusal};
use crate::problem::Problem;
use axum::extract::State;
use maud::{html, Markup};
use rp_app::console::{EVENTS_COUNTED as COUNTED, EVENTS_SHOWN as SHOWN};
use rp_app::AppState;
use rp_app::HasClock;
use rp_domain::apps::AppId;
use rp_domain::events::{EventRecord, NAMES};
use rp_domain::EpochMillis;
use rp_repo::events::EventFilter;
use rp_repo::Order;
use serde::Deserialize;
/// Bars of the timeline.
const BUCKETS: usize = 24;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct EventQuery {
    name: Option<String>,
    app: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

/// A time of the filter: `2026-11-27T08:00` (as a `datetime-local` field sends it, read as
/// UTC), with seconds or a zone if given.
fn time(field: &str, text: Option<String>) -> Result<Option<EpochMillis>, Problem> {
    let Some(text) = view::given(text) else {
        return Ok(None);
    };
    let text = text.trim();
    let candidates = [text.to_owned(), format!("{text}Z"), format!("{text}:00Z")];
    candidates
        .iter()
        .find_map(|candidate| EpochMillis::parse_iso8601(candidate))
        .map(Some)
        .ok_or_else(|| Problem::invalid(field, "must be a time such as 2026-11-27T08:00 (UTC)"))
}

/// `2026-11-27T08:00`, as a `datetime-local` field shows it.
fn field_value(at: EpochMillis) -> String {
    at.iso8601()[..16].to_owned()
}

/// `GET /console/events?name=&app=&from=&to=`
pub async fn show(
    State(state): State<AppState>,
    Global(op): Global,
    PageQuery(query): PageQuery<EventQuery>,
) -> Result<Page, Refusal> {
    let (filter, from, to) = filter(query, state.clock().now_millis())?;
    let (events, more) = rp_app::console::events(&state, &filter, COUNTED, Order::OldestFirst).await?;
    // Past the count, the newest events are not among those counted: read from the other end.
    let newest = match more {
        true => rp_app::console::events(&state, &filter, SHOWN, Order::NewestFirst).await?.0,
        false => events.iter().rev().take(SHOWN).cloned().collect(),
    };
    let body = html! {
        (filter_form(&filter, from, to))
        p.muted { "Events found: " (events.len()) @if more { "+" } ", from " (when(from)) " to " (when(to)) "." @if more { " The timeline counts the first " (COUNTED) "." } }
        (timeline(&events, from, to))
        @if !newest.is_empty() { (event_table(&newest)) }
    };
    Ok(Page::new(Some(&op), "Events", body))
}

/// The filter `query` asks for, with its window: the 24 hours up to `now` unless it says
/// otherwise.
fn filter(query: EventQuery, now: EpochMillis) -> Result<(EventFilter, EpochMillis, EpochMillis), Problem> {
    let name = view::given(query.name);
    let odd = |name: &str| {
        name.len() > 64 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    };
    if name.as_deref().is_some_and(odd) {
        return Err(Problem::invalid("name", "is not an event name"));
    }
    let app_id = view::given(query.app).map(|a| AppId::parse("app", a.trim())).transpose()?;
    let to = time("to", query.to)?.unwrap_or(now);
    let from = time("from", query.from)?.unwrap_or(to.plus_secs(-24 * 3600));
    if from >= to {
        return Err(Problem::invalid("from", "must be before to"));
    }
    Ok((EventFilter { name, app_id, from: Some(from), to: Some(to) }, from, to))
}

fn filter_form(filter: &EventFilter, from: EpochMillis, to: EpochMillis) -> Markup {
    html! {
        form.card.row #event-filter method="get" action="/console/events" {
            div {
                label for="name" { "Event" }
                input #name type="text" name="name" list="event-names" value=[filter.name.as_deref()] placeholder="any";
                datalist #event-names { @for known in NAMES { option value=(known) {} } }
            }
            div { label for="app" { "App" } input #app type="text" name="app" value=[filter.app_id.as_ref().map(AppId::as_str)]; }
            div { label for="from" { "From (UTC)" } input #from type="datetime-local" name="from" value=(field_value(from)); }
            div { label for="to" { "To (UTC)" } input #to type="datetime-local" name="to" value=(field_value(to)); }
            button type="submit" { "Show" }
        }
    }
}

/// `newest`, the newest [`SHOWN`] events, newest first.
fn event_table(newest: &[EventRecord]) -> Markup {
    html! {
        table #events {
            thead { tr { th { "At" } th { "Event" } th { "App" } th { "Source" } th { "Attributes" } } }
            tbody {
                @for event in newest {
                    tr {
                        td { (when(event.at)) }
                        td { (event.name) }
                        td { @if let Some(app) = &event.app_id { (app) } }
                        td { code { (event.source) } }
                        td { code { (serde_json::Value::Object(event.attributes.clone())) } }
                    }
                }
            }
        }
    }
}

/// The events' counts in [`BUCKETS`] equal spans of `from`..`to`, as bars.
fn timeline(events: &[EventRecord], from: EpochMillis, to: EpochMillis) -> Markup {
    let span = (to.as_millis() - from.as_millis()).max(1);
    let mut counts = [0usize; BUCKETS];
    for event in events {
        let offset = (event.at.as_millis() - from.as_millis()).clamp(0, span - 1);
        counts[(i128::from(offset) * BUCKETS as i128 / i128::from(span)) as usize] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(0).max(1);
    let (left, width, height) = (40.0, 700.0, 120.0);
    let slot = width / BUCKETS as f64;
    let label = format!("{} events from {} to {}", events.len(), when(from), when(to));
    html! {
        svg.timeline #timeline viewBox="0 0 760 160" role="img" aria-label=(label) {
            text x="0" y="16" { (top) }
            text x="0" y=(format!("{:.0}", 10.0 + height)) { "0" }
            @for (i, count) in counts.iter().enumerate() {
                @let bar = *count as f64 / top as f64 * height;
                @let start = EpochMillis(from.as_millis() + span * i as i64 / BUCKETS as i64);
                rect.bar x=(format!("{:.1}", left + i as f64 * slot + 1.0)) y=(format!("{:.1}", 10.0 + height - bar))
                    width=(format!("{:.1}", slot - 2.0)) height=(format!("{bar:.1}")) {
                    title { (count) " from " (when(start)) }
                }
            }
            text x=(left) y="152" { (when(from)) }
            text x=(left + width) y="152" text-anchor="end" { (when(to)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_a_datetime_field_sends_them() {
        let at = |text: &str| time("from", Some(text.to_owned())).unwrap().unwrap().iso8601();
        assert_eq!(at("2026-11-27T08:00"), "2026-11-27T08:00:00.000Z");
        assert_eq!(at("2026-11-27T08:00:30"), "2026-11-27T08:00:30.000Z");
        assert_eq!(at("2026-11-27T08:00:00+01:00"), "2026-11-27T07:00:00.000Z");
        assert!(time("from", Some("yesterday".into())).is_err());
        assert_eq!(time("from", Some(" ".into())).unwrap(), None);
    }

    /// Each event is counted once, in the hour of the window it falls in (the window's end in
    /// the last); a window that does not start at the epoch is measured from its start.
    #[test]
    fn the_timeline_counts_each_event_once() {
        const HOUR: i64 = 3600 * 1000;
        let from = EpochMillis::parse_iso8601("2026-11-27T08:00:00Z").unwrap();
        let to = from.plus_secs(24 * 3600);
        let at = |ms: i64| EpochMillis(from.as_millis() + ms);
        let event =
            |ms: i64| EventRecord::new("OOB_REQUEST_STARTED", None, "server", at(ms), Default::default());
        let events = [event(0), event(HOUR - 1), event(HOUR), event(24 * HOUR)];
        let svg = timeline(&events, from, to).into_string();
        assert_eq!(svg.matches("<rect").count(), BUCKETS);
        let bar = |count: usize, hour: i64| format!("<title>{count} from {}</title>", when(at(hour * HOUR)));
        assert!(svg.contains(&bar(2, 0)) && svg.contains(&bar(1, 1)) && svg.contains(&bar(1, 23)), "{svg}");
        assert_eq!(svg.matches("<title>0 from").count(), BUCKETS - 3, "{svg}");
        assert!(svg.contains("4 events from"), "{svg}");
        // The bars stand side by side inside the drawing (40 to 740), the tallest 120 high.
        let number = |rect: &str, name: &str| -> f64 {
            let at = rect.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            rect[at..at + rect[at..].find('"').unwrap()].parse().unwrap()
        };
        let rects: Vec<&str> = svg.split("<rect").skip(1).collect();
        let spans: Vec<(f64, f64)> =
            rects.iter().map(|r| (number(r, "x"), number(r, "x") + number(r, "width"))).collect();
        assert!(spans[0].0 >= 40.0 && spans[BUCKETS - 1].1 <= 740.0, "{spans:?}");
        assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0 && w[0].0 < w[0].1), "{spans:?}");
        let heights: Vec<f64> = rects.iter().take(2).map(|r| number(r, "height")).collect();
        assert_eq!(heights, [120.0, 60.0]);
    }
}
