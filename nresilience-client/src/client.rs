//! A ready retrying HTTP client over hyper-util's connection-pooling client.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::Body;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use nresilience_core::{RetryError, RetryPolicy};
use tower::{Layer, ServiceExt};

use crate::body::{BoxError, RetryBody, TransportError};
use crate::layer::{Retry, RetryLayer};

type Inner<C> = HyperClient<C, RetryBody>;

/// A retrying HTTP/1 and HTTP/2 (prior knowledge off: HTTP/1 unless configured) client,
/// built on hyper-util, with [`RetryLayer`] in front: over plain TCP, or, with the feature
/// `rustls`, over TLS as well ([`ClientBuilder::build_tls`]; `C` is then hyper-rustls's
/// connector).
///
/// Clones share the connection pool, the policy's buckets and the per-host buckets.
///
/// # Example
///
/// ```no_run
/// use nresilience_client::Client;
/// use nresilience_core::RetryPolicy;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let client = Client::new(RetryPolicy::default());
/// let response = client.get("http://127.0.0.1:8080/health").await?;
/// assert!(response.status().is_success());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client<C = HttpConnector> {
    service: Retry<Inner<C>>,
}

/// Configures a [`Client`].
#[must_use]
pub struct ClientBuilder {
    layer: RetryLayer,
    connect_timeout: Option<Duration>,
    http2_only: bool,
}

impl Client {
    /// A client with default connection settings retrying under `policy`.
    ///
    /// Build it once and clone it (clones share the policy, its budget and the connection
    /// pool): a client built per request carries a budget that is discarded before it sees
    /// enough traffic to bound anything.
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Self {
        Self::builder(policy).build()
    }

    /// A builder for a client retrying under `policy`.
    pub fn builder(policy: RetryPolicy) -> ClientBuilder {
        ClientBuilder {
            layer: RetryLayer::new(policy),
            connect_timeout: Some(Duration::from_secs(5)),
            http2_only: false,
        }
    }
}

impl<C> Client<C>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    /// Sends `request`, retrying as the policy allows.
    pub async fn request<B>(
        &self,
        request: Request<B>,
    ) -> Result<Response<Incoming>, RetryError<TransportError>>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<BoxError>,
    {
        // hyper-util's client serves through a reference: no clone of its pool handles per call.
        self.service.by_ref().oneshot(request).await
    }

    /// Sends a GET to `uri`.
    pub async fn get<U>(&self, uri: U) -> Result<Response<Incoming>, RetryError<TransportError>>
    where
        U: TryInto<Uri>,
        U::Error: Into<http::Error>,
    {
        let request = Request::get(uri)
            .body(http_body_util::Empty::<Bytes>::new())
            .map_err(invalid_request)?;
        self.request(request).await
    }

    /// The retry layer in front of the connection pool.
    pub fn layer(&self) -> &Retry<Inner<C>> {
        &self.service
    }
}

fn invalid_request(error: http::Error) -> RetryError<TransportError> {
    RetryError::not_attempted(TransportError::new(error))
}

impl ClientBuilder {
    /// The retry layer's settings (non-idempotent opt-in, body buffer cap, classifier).
    pub fn layer(mut self, configure: impl FnOnce(RetryLayer) -> RetryLayer) -> Self {
        self.layer = configure(self.layer);
        self
    }

    /// The TCP connect timeout; `None` for none. Defaults to 5 s.
    pub fn connect_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Speaks HTTP/2 with prior knowledge (for h2c servers such as gRPC). Defaults to
    /// `false` (HTTP/1.1).
    pub fn http2_only(mut self, http2_only: bool) -> Self {
        self.http2_only = http2_only;
        self
    }

    /// The client, for `http` URIs.
    #[must_use]
    pub fn build(self) -> Client {
        let connector = self.connector();
        self.client(connector)
    }

    /// The client, for `https` and `http` URIs, with rustls configured by `tls` (its root
    /// certificates say which servers it trusts; its ALPN protocols are set here, HTTP/2 and
    /// HTTP/1.1, unless [`http2_only`](Self::http2_only)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use nresilience_client::{rustls, Client};
    /// use nresilience_core::RetryPolicy;
    ///
    /// # fn main() -> Result<(), rustls::Error> {
    /// let provider = Arc::new(rustls::crypto::ring::default_provider());
    /// let roots = rustls::RootCertStore::empty(); // add the CAs the client trusts
    /// let tls = rustls::ClientConfig::builder_with_provider(provider)
    ///     .with_safe_default_protocol_versions()?
    ///     .with_root_certificates(roots)
    ///     .with_no_client_auth();
    /// let client = Client::builder(RetryPolicy::builder().name("inventory").build().unwrap())
    ///     .build_tls(tls);
    /// assert_eq!(client.layer().policy().name(), "inventory");
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "rustls")]
    #[must_use]
    pub fn build_tls(
        self,
        tls: rustls::ClientConfig,
    ) -> Client<hyper_rustls::HttpsConnector<HttpConnector>> {
        let mut http = self.connector();
        // The TLS connector hands `https` URIs to it: it must not refuse them.
        http.enforce_http(false);
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let connector = if self.http2_only {
            builder.enable_http2().wrap_connector(http)
        } else {
            builder.enable_all_versions().wrap_connector(http)
        };
        self.client(connector)
    }

    fn connector(&self) -> HttpConnector {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(self.connect_timeout);
        connector.set_nodelay(true);
        connector
    }

    fn client<C>(self, connector: C) -> Client<C>
    where
        C: Connect + Clone + Send + Sync + 'static,
    {
        let inner = HyperClient::builder(TokioExecutor::new())
            .http2_only(self.http2_only)
            .build(connector);
        Client {
            service: self.layer.layer(inner),
        }
    }
}

impl<C> fmt::Debug for Client<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("policy", self.service.policy())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("layer", &self.layer)
            .field("connect_timeout", &self.connect_timeout)
            .field("http2_only", &self.http2_only)
            .finish()
    }
}
