//! What the servers under test report, and a raw HTTP/1 client that can send any bytes.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Once};

use http::HeaderMap;
use nresilience_axum::{nesting, RetryMarker};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::SubscriberExt;

/// What a handler saw: the nesting context, the extension, the marker header it was handed.
pub(crate) fn report(extension: Option<&RetryMarker>, headers: &HeaderMap) -> String {
    let context = nesting::current().map_or("none", |source| source.as_str());
    let extension = if extension.is_some() { "yes" } else { "no" };
    let header = headers
        .get(nresilience_axum::wire::MARKER)
        .map_or("absent", |_| "present");
    format!("context={context} extension={extension} header={header}")
}

pub(crate) const MARKED: &str = "context=header extension=yes header=present";
pub(crate) const UNMARKED: &str = "context=none extension=no header=absent";
/// A malformed marker reaches the handler as sent, but marks nothing.
pub(crate) const MALFORMED: &str = "context=none extension=no header=present";

/// A listener on an ephemeral loopback port.
pub(crate) async fn loopback() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    (listener, addr)
}

/// Sends one HTTP/1.1 GET with `headers` written byte for byte; returns status and body.
pub(crate) async fn http1_get(addr: SocketAddr, path: &str, headers: &[&[u8]]) -> (u16, String) {
    let mut request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n").into_bytes();
    for header in headers {
        request.extend_from_slice(header);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"\r\n");

    let mut stream = TcpStream::connect(addr).await.expect("connecting");
    stream
        .write_all(&request)
        .await
        .expect("writing the request");
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .await
        .expect("reading the response");
    let response = String::from_utf8(response).expect("a utf-8 response");

    let status = response[9..12].parse().expect("a status line");
    let (head, body) = response.split_once("\r\n\r\n").expect("a header block");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        // One chunk is all these small bodies need.
        body.split("\r\n").nth(1).unwrap_or_default().to_owned()
    } else {
        body.to_owned()
    };
    (status, body)
}

/// Every event recorded on one thread while it records: `LEVEL message field=value ...`.
#[derive(Clone, Default)]
pub(crate) struct Events(Arc<Mutex<Vec<String>>>);

impl Events {
    pub(crate) fn recorded(&self) -> Vec<String> {
        self.0.lock().expect("not poisoned").clone()
    }

    /// Records the events this thread emits while `f` runs.
    ///
    /// One global subscriber routes each event to the recording of the thread that emitted
    /// it: a per-thread default subscriber races on tracing's global callsite cache with the
    /// tests running in parallel, which can leave a callsite disabled for it.
    pub(crate) fn record<T>(&self, f: impl FnOnce() -> T) -> T {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            let subscriber = tracing_subscriber::registry().with(ThreadEvents);
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber");
        });
        RECORDING.with(|recording| *recording.borrow_mut() = Some(self.clone()));
        let result = f();
        RECORDING.with(|recording| *recording.borrow_mut() = None);
        result
    }

    fn push(&self, event: &Event<'_>) {
        struct Line(String);
        impl Visit for Line {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0.push_str(&format!(" {value:?}"));
                } else {
                    self.0.push_str(&format!(" {}={value:?}", field.name()));
                }
            }
        }
        let mut line = Line(event.metadata().level().to_string());
        event.record(&mut line);
        self.0.lock().expect("not poisoned").push(line.0);
    }
}

thread_local! {
    static RECORDING: RefCell<Option<Events>> = const { RefCell::new(None) };
}

/// Hands each event to the recording of the thread that emitted it, if any.
struct ThreadEvents;

impl<S: Subscriber> tracing_subscriber::Layer<S> for ThreadEvents {
    fn on_event(&self, event: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        RECORDING.with(|recording| {
            if let Some(events) = recording.borrow().as_ref() {
                events.push(event);
            }
        });
    }
}
