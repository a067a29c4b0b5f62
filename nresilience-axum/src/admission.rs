//! [`AdmissionLayer`]: a service over its capacity refuses retries before first attempts,
//! sheddable requests before critical ones, and work its caller cannot wait for, without
//! running the handler (F4).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use nresilience_core::chain::Signal;
use nresilience_core::clock;
use nresilience_core::fleet::{Admitted, Refused, ServerAdmission};
use nresilience_core::overload::{InvalidOverload, OverloadControl};
use nresilience_core::Criticality;
use nresilience_wire as wire;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

/// gRPC's `UNAVAILABLE`: what a gRPC client reads as "not now".
const GRPC_UNAVAILABLE: HeaderValue = HeaderValue::from_static("14");

/// Admits the requests reaching the service by the evidence a client's overload control
/// uses, and refuses the rest at once with the overload signal (F4, C1).
///
/// What a request says of itself decides its place: its attempt number
/// (`x-nresilience-attempt`, or gRPC's `grpc-previous-rpc-attempts`: a retry is refused
/// before a first attempt of its criticality), its criticality (`x-nresilience-chain`) and
/// how long its caller still waits (`x-nresilience-deadline-ms`). A request that says
/// nothing is a normal first attempt with no deadline. The limit binds only once requests
/// accumulate in the handlers — the handlers finishing less than four fifths of what
/// arrives — never because the handlers are merely slower (O5); see
/// [`ServerAdmission`] for the shares.
///
/// A refused request is answered `503` with `x-nresilience-overloaded: 1` and `Retry-After`
/// (a gRPC request: `grpc-status: 14` with `grpc-retry-pushback-ms: -1`), so no nresilience
/// or gRPC client retries it, and its handler never runs. Put the layer outside the
/// handlers it protects and inside an edge's
/// [`ignore_inbound`](crate::NestedRetryLayer::ignore_inbound), so a public caller cannot
/// claim to be a first attempt's critical call.
///
/// A request whose caller goes away is counted as ended when the server drops its handler's
/// future, as axum and hyper do: the handler's work stops with it. Work a handler spawns to
/// outlive its request (a database that finishes a query nobody waits for) is not seen; a
/// service built that way should admit inside the spawned work, with
/// [`ServerAdmission`] itself.
///
/// Clones share one admission: build the layer once per service, as a router's `layer` does.
///
/// ```
/// use axum::{body::Body, http::Request, routing::get, Router};
/// use nresilience_axum::AdmissionLayer;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = Router::new()
///     .route("/", get(|| async { "ok" }))
///     .layer(AdmissionLayer::new());
/// // With nothing in the handlers, every request is admitted.
/// let response = app.oneshot(Request::get("/").body(Body::empty())?).await?;
/// assert_eq!(response.status(), 200);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[must_use]
pub struct AdmissionLayer {
    admission: Arc<ServerAdmission>,
}

impl AdmissionLayer {
    /// A layer with the overload control's defaults.
    pub fn new() -> Self {
        Self {
            admission: Arc::new(ServerAdmission::new(clock::now())),
        }
    }

    /// A layer whose limit `control` sets, or the reason `control` is invalid.
    pub fn with_control(control: OverloadControl) -> Result<Self, InvalidOverload> {
        ServerAdmission::with_control(control, clock::now()).map(|admission| Self {
            admission: Arc::new(admission),
        })
    }

    /// The admission this layer's services share, for a gauge of its limit.
    #[must_use]
    pub fn admission(&self) -> &Arc<ServerAdmission> {
        &self.admission
    }
}

impl Default for AdmissionLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for AdmissionLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionLayer")
            .field("admission", &self.admission)
            .finish()
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admission {
            inner,
            admission: Arc::clone(&self.admission),
        }
    }
}

/// The service [`AdmissionLayer`] applies.
#[derive(Clone)]
pub struct Admission<S> {
    inner: S,
    admission: Arc<ServerAdmission>,
}

impl<S: fmt::Debug> fmt::Debug for Admission<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admission")
            .field("inner", &self.inner)
            .field("admission", &self.admission)
            .finish()
    }
}

impl<S, B, ResB> Service<Request<B>> for Admission<S>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    ResB: Default,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = AdmissionFuture<S::Future, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let now = clock::now();
        let headers = request.headers();
        let retry = wire::read_attempt(headers).is_some_and(wire::AttemptOf::is_retry);
        let (criticality, left) = caller_word(headers, now);
        match self.admission.admit(retry, criticality, left, now) {
            Ok(admitted) => {
                let held = Held {
                    admission: Arc::clone(&self.admission),
                    admitted: Some(admitted),
                };
                AdmissionFuture::admitted(self.inner.call(request), held)
            }
            Err(refused) => {
                tracing::debug!(
                    cause = refused.cause.as_str(),
                    retry,
                    ?criticality,
                    "refused a request over the service's capacity"
                );
                AdmissionFuture::refused(refusal(&refused, is_grpc(headers)))
            }
        }
    }
}

/// The request's criticality and how long its caller still waits, from its chain headers
/// (or `grpc-timeout`).
fn caller_word(headers: &HeaderMap, now: Instant) -> (Criticality, Option<std::time::Duration>) {
    let inbound = wire::carries_chain_headers(headers)
        .then(|| wire::RequestHeaders::read(headers).inbound())
        .flatten();
    let criticality = inbound
        .and_then(|inbound| inbound.criticality)
        .unwrap_or(Criticality::Normal);
    let left = match inbound.and_then(|inbound| inbound.deadline) {
        Some(deadline) => Some(deadline.saturating_duration_since(now)),
        None => headers
            .get(&wire::GRPC_TIMEOUT)
            .and_then(|value| wire::grpc_timeout(value.as_bytes())),
    };
    (criticality, left)
}

fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

/// The answer to a refused request: the overload signal (C1), with the refusal's hint.
fn refusal<ResB: Default>(refused: &Refused, grpc: bool) -> Response<ResB> {
    let mut response = Response::new(ResB::default());
    let headers = response.headers_mut();
    if grpc {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(wire::GRPC_STATUS, GRPC_UNAVAILABLE);
        wire::write_grpc_signal(headers, Signal::Overloaded);
    } else {
        wire::write_signal(headers, Signal::Overloaded, Some(refused.retry_after));
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    response
}

/// An admitted request's place, handed back when its handler answers or is dropped.
struct Held {
    admission: Arc<ServerAdmission>,
    admitted: Option<Admitted>,
}

impl Held {
    fn finished(&mut self) {
        if let Some(admitted) = self.admitted.take() {
            self.admission.finished(admitted, clock::now());
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(admitted) = self.admitted.take() {
            self.admission.cancelled(admitted, clock::now());
        }
    }
}

pin_project! {
    /// The response future of [`Admission`]: the handler's, or the refusal.
    #[must_use = "futures do nothing unless polled"]
    pub struct AdmissionFuture<F, ResB> {
        #[pin]
        state: State<F, ResB>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, ResB> {
        Admitted {
            #[pin]
            inner: F,
            held: Held,
        },
        Refused {
            answer: Option<Response<ResB>>,
        },
    }
}

impl<F, ResB> AdmissionFuture<F, ResB> {
    fn admitted(inner: F, held: Held) -> Self {
        Self {
            state: State::Admitted { inner, held },
        }
    }

    fn refused(answer: Response<ResB>) -> Self {
        Self {
            state: State::Refused {
                answer: Some(answer),
            },
        }
    }
}

impl<F, ResB> fmt::Debug for AdmissionFuture<F, ResB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Admitted { .. } => "admitted",
            State::Refused { .. } => "refused",
        };
        f.debug_tuple("AdmissionFuture").field(&state).finish()
    }
}

impl<F, ResB, E> Future for AdmissionFuture<F, ResB>
where
    F: Future<Output = Result<Response<ResB>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Admitted { inner, held } => {
                let output = std::task::ready!(inner.poll(cx));
                held.finished();
                Poll::Ready(output)
            }
            StateProj::Refused { answer } => match answer.take() {
                Some(answer) => Poll::Ready(Ok(answer)),
                None => panic!("AdmissionFuture polled after it completed"),
            },
        }
    }
}
