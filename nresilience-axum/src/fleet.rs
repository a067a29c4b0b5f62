//! [`FleetLayer`]: the service as its callers' coordinator (F2). It counts the first attempts
//! and the retries reaching the service and tells every caller, on every answer, how the
//! fleet's retries stand against the share it accepts; an nresilience client follows the
//! advice with its own budget (F3), and any other client ignores a header it does not know.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use nresilience_core::clock;
use nresilience_core::fleet::{RetryShare, DEFAULT_ACCEPTED};
use nresilience_core::telemetry::FleetGauges;
use nresilience_wire as wire;
use pin_project_lite::pin_project;
use tower::{Layer, Service};

/// Counts the attempts reaching the service, by what each says it is (`x-nresilience-attempt`,
/// or gRPC's `grpc-previous-rpc-attempts`; a request that says neither counts as a first
/// attempt), and writes `x-nresilience-fleet` on every answer (F2).
///
/// Clones share one count: build the layer once per service, as a router's `layer` does.
/// The share seen, the share accepted and the allowance advised are gauges
/// (`nresilience.fleet.retries`, `.accepted`, `.allowance`) of the meter provider installed
/// when the layer is built, observed while any service it made lives.
///
/// ```
/// use axum::{body::Body, http::Request, routing::get, Router};
/// use nresilience_axum::FleetLayer;
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = Router::new()
///     .route("/", get(|| async { "ok" }))
///     .layer(FleetLayer::new()); // accepts 10 % retries
/// let response = app.oneshot(Request::get("/").body(Body::empty())?).await?;
/// assert_eq!(
///     response.headers()["x-nresilience-fleet"],
///     "retries=0.000, accepted=0.100, allowance=1.000"
/// );
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[must_use]
pub struct FleetLayer {
    share: Arc<RetryShare>,
    gauges: Arc<FleetGauges>,
}

impl FleetLayer {
    /// A layer accepting the budget's own share of retries, 10 % of first attempts.
    pub fn new() -> Self {
        Self::accepting(DEFAULT_ACCEPTED).unwrap_or_else(|| unreachable!("0.1 is a share"))
    }

    /// A layer accepting `accepted` retries per first attempt; `None` unless it is in `0..=1`.
    #[must_use]
    pub fn accepting(accepted: f64) -> Option<Self> {
        RetryShare::new(accepted, clock::now()).map(|share| {
            let share = Arc::new(share);
            let gauges = Arc::new(FleetGauges::new(&share));
            Self { share, gauges }
        })
    }

    /// The count this layer's services share, for a gauge of the share seen.
    #[must_use]
    pub fn share(&self) -> &Arc<RetryShare> {
        &self.share
    }
}

impl Default for FleetLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for FleetLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetLayer")
            .field("share", &self.share)
            .finish()
    }
}

impl<S> Layer<S> for FleetLayer {
    type Service = Fleet<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Fleet {
            inner,
            share: Arc::clone(&self.share),
            _gauges: Arc::clone(&self.gauges),
        }
    }
}

/// The service [`FleetLayer`] applies.
#[derive(Clone)]
pub struct Fleet<S> {
    inner: S,
    share: Arc<RetryShare>,
    /// Observed while any service of the layer lives.
    _gauges: Arc<FleetGauges>,
}

impl<S: fmt::Debug> fmt::Debug for Fleet<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("inner", &self.inner)
            .field("share", &self.share)
            .finish()
    }
}

impl<S, B, ResB> Service<Request<B>> for Fleet<S>
where
    S: Service<Request<B>, Response = Response<ResB>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = FleetFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let retry = wire::read_attempt(request.headers()).is_some_and(wire::AttemptOf::is_retry);
        self.share.record(retry, clock::now());
        FleetFuture {
            inner: self.inner.call(request),
            share: Arc::clone(&self.share),
        }
    }
}

pin_project! {
    /// The response future of [`Fleet`]: the inner service's, with the advice written on its
    /// answer.
    #[must_use = "futures do nothing unless polled"]
    pub struct FleetFuture<F> {
        #[pin]
        inner: F,
        share: Arc<RetryShare>,
    }
}

impl<F> fmt::Debug for FleetFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetFuture").finish_non_exhaustive()
    }
}

impl<F, ResB, E> Future for FleetFuture<F>
where
    F: Future<Output = Result<Response<ResB>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut output = std::task::ready!(this.inner.poll(cx));
        if let Ok(response) = &mut output {
            let advice = this.share.advice(clock::now());
            response
                .headers_mut()
                .insert(wire::FLEET, wire::fleet_value(&advice));
        }
        Poll::Ready(output)
    }
}
