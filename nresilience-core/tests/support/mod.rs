//! A tracing layer that keeps spans and events in memory, for assertions.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Once};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Debug, Clone, Default)]
pub struct Captured {
    pub name: String,
    pub fields: HashMap<String, String>,
    pub parent: Option<String>,
}

impl Captured {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Default)]
struct State {
    /// Span ids are reused once a span closes, so spans are kept in order of creation and
    /// the id only points at the live one.
    spans: Vec<Captured>,
    live: HashMap<u64, usize>,
    events: Vec<Captured>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Mutex<State>>>> = const { RefCell::new(None) };
}

/// Captures everything recorded on this thread while it lives.
///
/// One global subscriber routes to the capture of the recording thread: per-thread default
/// subscribers race on tracing's global callsite cache when tests run in parallel.
pub struct Capture {
    state: Arc<Mutex<State>>,
}

impl Capture {
    pub fn install() -> Self {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            let subscriber = tracing_subscriber::registry().with(CaptureLayer);
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber");
        });
        let state = Arc::new(Mutex::new(State::default()));
        CURRENT.with(|c| *c.borrow_mut() = Some(Arc::clone(&state)));
        Self { state }
    }

    pub fn spans_named(&self, name: &str) -> Vec<Captured> {
        let state = self.state.lock().unwrap();
        state
            .spans
            .iter()
            .filter(|s| s.name == name)
            .cloned()
            .collect()
    }

    pub fn events_named(&self, message: &str) -> Vec<Captured> {
        let state = self.state.lock().unwrap();
        state
            .events
            .iter()
            .filter(|e| e.name == message)
            .cloned()
            .collect()
    }

    /// Spans with `name` recorded so far by the capture installed on this thread.
    pub fn count_now(name: &str) -> usize {
        CURRENT.with(|c| {
            c.borrow().as_ref().map_or(0, |state| {
                state
                    .lock()
                    .unwrap()
                    .spans
                    .iter()
                    .filter(|s| s.name == name)
                    .count()
            })
        })
    }
}

struct CaptureLayer;

impl CaptureLayer {
    fn with_state(f: impl FnOnce(&mut State)) {
        CURRENT.with(|c| {
            if let Some(state) = c.borrow().as_ref() {
                f(&mut state.lock().unwrap());
            }
        });
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S> Layer<S> for CaptureLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut captured = Captured {
            name: attrs.metadata().name().to_owned(),
            ..Captured::default()
        };
        attrs.record(&mut Fields(&mut captured.fields));
        captured.parent = ctx
            .span(id)
            .and_then(|s| s.parent().map(|p| p.name().to_owned()));
        Self::with_state(|state| {
            let index = state.spans.len();
            state.spans.push(captured);
            state.live.insert(id.into_u64(), index);
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        Self::with_state(|state| {
            if let Some(&index) = state.live.get(&id.into_u64()) {
                values.record(&mut Fields(&mut state.spans[index].fields));
            }
        });
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let name = fields.remove("message").unwrap_or_default();
        Self::with_state(|state| {
            state.events.push(Captured {
                name,
                fields,
                parent: None,
            })
        });
    }
}
