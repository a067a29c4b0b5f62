//! What the behaviour suite needs of an HTTP retry driver, whichever client it sits in.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use nresilience_core::call::Attempts;
use nresilience_core::nesting::{self, NestingSource};
use nresilience_core::{RetryError, RetryPolicyBuilder};

/// A retrying HTTP client built around one of the drivers.
pub trait Driver: Sized {
    /// What a failed attempt ends with, in this driver's client.
    type Error: std::fmt::Debug;

    /// A client retrying under `policy`, with the driver's defaults.
    fn new(policy: RetryPolicyBuilder) -> Self {
        Self::with(policy, Setup::default())
    }

    /// A client retrying under `policy`, set up as `setup` says.
    fn with(policy: RetryPolicyBuilder, setup: Setup) -> Self;

    /// Sends `request` through the driver: the last response, read whole, or why the call
    /// stopped without one.
    fn send(
        &self,
        request: Outbound,
    ) -> impl Future<Output = Result<Reply, RetryError<Self::Error>>>;

    /// Whether `error` is a failure to connect.
    fn is_connect(error: &Self::Error) -> bool;
}

/// The driver settings the suite varies.
#[derive(Clone, Default)]
pub struct Setup {
    /// Retries non-idempotent methods too.
    pub retry_non_idempotent: bool,
    /// Sits behind the driver and notes the nesting context each attempt goes out in.
    pub probe: Option<NestingProbe>,
}

/// A request as the suite describes it; each driver builds its own from it.
#[derive(Clone, Debug)]
pub struct Outbound {
    pub method: Method,
    pub addr: SocketAddr,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The per-request choice (a `Retryable` extension), when the request makes one.
    pub retryable: Option<bool>,
    /// The per-request choice of hedging (a `Hedgeable` extension), when it makes one.
    pub hedgeable: Option<bool>,
}

impl Outbound {
    pub fn new(method: Method, addr: SocketAddr, body: impl Into<Bytes>) -> Self {
        Self {
            method,
            addr,
            headers: HeaderMap::new(),
            body: body.into(),
            retryable: None,
            hedgeable: None,
        }
    }

    pub fn get(addr: SocketAddr) -> Self {
        Self::new(Method::GET, addr, Bytes::new())
    }

    pub fn post(addr: SocketAddr, body: &'static str) -> Self {
        Self::new(Method::POST, addr, body)
    }

    pub fn retryable(mut self, choice: bool) -> Self {
        self.retryable = Some(choice);
        self
    }

    pub fn hedgeable(mut self, choice: bool) -> Self {
        self.hedgeable = Some(choice);
        self
    }

    pub fn headers(mut self, headers: &HeaderMap) -> Self {
        self.headers.extend(headers.clone());
        self
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// A GET with nothing but a URL, as the clients' shorthands send it.
    pub fn is_plain_get(&self) -> bool {
        self.method == Method::GET
            && self.headers.is_empty()
            && self.body.is_empty()
            && self.retryable.is_none()
            && self.hedgeable.is_none()
    }
}

/// A response as the driver returned it.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// What the response's extension says of the attempts behind it (H8).
    pub attempts: Option<Attempts>,
}

/// The headers a request arrives with, as a proxy-like handler receives them.
pub fn inbound(headers: &[(&'static str, &'static str)]) -> HeaderMap {
    headers
        .iter()
        .map(|(name, value)| {
            (
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            )
        })
        .collect()
}

/// The nesting context each attempt went out in, in order.
#[derive(Clone, Default)]
pub struct NestingProbe(Arc<Mutex<Vec<Option<NestingSource>>>>);

impl NestingProbe {
    /// Notes the context the caller runs in now.
    pub fn see(&self) {
        self.0.lock().unwrap().push(nesting::current());
    }

    pub fn seen(&self) -> Vec<Option<NestingSource>> {
        self.0.lock().unwrap().clone()
    }
}
