//! The spans a test opens on its own thread, with the fields they were opened with and those
//! recorded on them later.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, Once};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// A span as it was opened, with what was recorded on it since.
#[derive(Clone, Debug)]
pub struct Opened {
    pub name: &'static str,
    pub fields: HashMap<&'static str, String>,
    id: u64,
}

impl Opened {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

type Log = Arc<Mutex<Vec<Opened>>>;

thread_local! {
    static RECORDING: RefCell<Option<Log>> = const { RefCell::new(None) };
}

/// Records the spans this thread opens while it lives.
pub struct Spans(Log);

impl Spans {
    /// One global subscriber routes each span to the recording of its thread: a per-thread
    /// default subscriber races on tracing's global callsite cache with the tests running in
    /// parallel, which can leave a callsite disabled for it.
    pub fn record() -> Self {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(ThreadSpans),
            )
            .unwrap();
        });
        let log = Log::default();
        RECORDING.with(|recording| *recording.borrow_mut() = Some(Arc::clone(&log)));
        Self(log)
    }

    pub fn named(&self, name: &str) -> Vec<Opened> {
        let log = self.0.lock().unwrap();
        log.iter().filter(|s| s.name == name).cloned().collect()
    }

    pub fn count(&self, name: &str) -> usize {
        self.named(name).len()
    }
}

impl Drop for Spans {
    fn drop(&mut self) {
        RECORDING.with(|recording| *recording.borrow_mut() = None);
    }
}

/// Hands each new span to the recording of the thread that opened it, if any.
struct ThreadSpans;

impl<S: Subscriber> Layer<S> for ThreadSpans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        RECORDING.with(|recording| {
            if let Some(log) = recording.borrow().as_ref() {
                let mut fields = Fields::default();
                attrs.record(&mut fields);
                log.lock().unwrap().push(Opened {
                    name: attrs.metadata().name(),
                    fields: fields.0,
                    id: id.into_u64(),
                });
            }
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        RECORDING.with(|recording| {
            if let Some(log) = recording.borrow().as_ref() {
                let mut log = log.lock().unwrap();
                // The latest span with this id: ids are reused once a span closes.
                if let Some(span) = log.iter_mut().rev().find(|s| s.id == id.into_u64()) {
                    let mut fields = Fields(std::mem::take(&mut span.fields));
                    values.record(&mut fields);
                    span.fields = fields.0;
                }
            }
        });
    }
}

#[derive(Default)]
struct Fields(HashMap<&'static str, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name(), format!("{value:?}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name(), value.to_string());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name(), value.to_string());
    }
}
