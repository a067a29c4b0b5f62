//! In tonic's server builder: a hand-built gRPC service behind `Server::builder().layer(..)`,
//! called over HTTP/2 by a tonic channel with the marker as lower-case metadata (SPEC N2).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response};
use nresilience_axum::{NestedRetryLayer, RetryMarker};
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tower::{Service, ServiceExt};

use crate::support::{self, MARKED, UNMARKED};

/// A unary gRPC method that answers in trailers-only form, with what it saw in a header.
#[derive(Clone)]
struct Probe;

impl NamedService for Probe {
    const NAME: &'static str = "nresilience.test.Probe";
}

impl Service<Request<Body>> for Probe {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        Box::pin(async move {
            tokio::task::yield_now().await;
            let seen =
                support::report(request.extensions().get::<RetryMarker>(), request.headers());
            let response = Response::builder()
                .header("content-type", "application/grpc")
                .header("grpc-status", "0")
                .header("x-seen", seen)
                .body(Body::empty())
                .expect("a response");
            Ok(response)
        })
    }
}

async fn serve(layer: NestedRetryLayer) -> Channel {
    let (listener, addr) = support::loopback().await;
    tokio::spawn(async move {
        Server::builder()
            .layer(layer)
            .add_routes(Routes::new(Probe))
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .expect("serving");
    });
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("an endpoint")
        .connect()
        .await
        .expect("a channel")
}

async fn check(channel: Channel, metadata: MetadataMap) -> String {
    let mut request = Request::post("/nresilience.test.Probe/Check")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Body::empty())
        .expect("a request");
    request.headers_mut().extend(metadata.into_headers());
    let response = channel.oneshot(request).await.expect("a response");
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.headers()["grpc-status"], "0");
    response.headers()["x-seen"]
        .to_str()
        .expect("an ascii report")
        .to_owned()
}

fn marker(value: &'static str) -> MetadataMap {
    let mut metadata = MetadataMap::new();
    metadata.insert(
        "x-nresilience-retrying",
        value.parse().expect("ascii metadata"),
    );
    metadata
}

#[tokio::test]
async fn n2_tonic_server_with_the_layer_sees_the_grpc_metadata_marker() {
    let channel = serve(NestedRetryLayer::new()).await;
    assert_eq!(check(channel, marker("1")).await, MARKED);
}

#[tokio::test]
async fn n2_tonic_server_without_the_marker_sees_no_flag() {
    let channel = serve(NestedRetryLayer::new()).await;
    assert_eq!(check(channel.clone(), MetadataMap::new()).await, UNMARKED);
    let seen = check(channel, marker("yes")).await;
    assert_eq!(seen, "context=none extension=no header=present");
}

#[tokio::test]
async fn trust_boundary_tonic_server_ignoring_inbound_drops_the_metadata_marker() {
    let channel = serve(NestedRetryLayer::new().ignore_inbound()).await;
    assert_eq!(check(channel, marker("1")).await, UNMARKED);
}

#[test]
fn n2_metadata_marker_is_the_lower_case_header() {
    let headers = marker("1").into_headers();
    assert_eq!(
        headers.get(nresilience_axum::wire::MARKER),
        Some(&HeaderValue::from_static("1"))
    );
}
