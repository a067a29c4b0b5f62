//! A malformed `Retry-After` is ignored with a debug event saying why (SPEC H2).
//!
//! Its own test binary with a global subscriber: thread-local subscribers in parallel
//! tests race on tracing's callsite cache.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::HeaderValue;
use nresilience_client::wire::parse_retry_after;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
}

fn parse(value: &str) -> Option<Duration> {
    parse_retry_after(&HeaderValue::from_str(value).unwrap(), now())
}

#[test]
fn h2_garbage_is_a_debug_event_with_the_reason() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let subscriber = Recorder {
        events: Arc::clone(&events),
    };
    tracing::subscriber::set_global_default(subscriber).unwrap();
    assert_eq!(parse("soon"), None);
    assert_eq!(parse(""), None);
    let opaque = HeaderValue::from_bytes(b"\xff").unwrap();
    assert_eq!(parse_retry_after(&opaque, now()), None);
    assert_eq!(parse("5"), Some(Duration::from_secs(5)));
    let events = events.lock().unwrap();
    assert_eq!(
        *events,
        [
            (
                tracing::Level::DEBUG,
                "ignoring retry-after that is neither delta-seconds nor an http-date".to_owned(),
                Some("soon".to_owned()),
            ),
            (
                tracing::Level::DEBUG,
                "ignoring empty retry-after".to_owned(),
                None,
            ),
            (
                tracing::Level::DEBUG,
                "ignoring retry-after that is not visible ascii".to_owned(),
                Some("\"\\xff\"".to_owned()),
            ),
        ]
    );
}

/// (level, message, `value` field) of every event.
type Recorded = Vec<(tracing::Level, String, Option<String>)>;

/// Records events; `tracing-subscriber` is not a dependency of this crate.
struct Recorder {
    events: Arc<Mutex<Recorded>>,
}

#[derive(Default)]
struct Fields {
    message: String,
    value: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "value" => self.value = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "value" => self.value = Some(format!("{value:?}")),
            _ => {}
        }
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.events
            .lock()
            .unwrap()
            .push((*event.metadata().level(), fields.message, fields.value));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
