//! A plain hyper service: `NestedRetry` around a tower `service_fn`, served by hyper-util's
//! HTTP/1 + HTTP/2 connection builder over a real socket.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use nresilience_axum::{NestedRetryLayer, RetryMarker};
use tower::{service_fn, Layer};

use crate::support::{self, MARKED, UNMARKED};

async fn serve(layer: NestedRetryLayer) -> SocketAddr {
    let service = layer.layer(service_fn(|request: Request<Incoming>| async move {
        tokio::task::yield_now().await;
        let seen = support::report(request.extensions().get::<RetryMarker>(), request.headers());
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(seen))))
    }));
    let (listener, addr) = support::loopback().await;
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.expect("accepting");
            let service = TowerToHyperService::new(service.clone());
            tokio::spawn(async move {
                auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                    .expect("serving a connection");
            });
        }
    });
    addr
}

#[tokio::test]
async fn n4_plain_hyper_service_sees_the_http1_marker_in_any_case() {
    let addr = serve(NestedRetryLayer::new()).await;
    let seen = support::http1_get(addr, "/", &[b"X-NResilience-Retrying: 1"]).await;
    assert_eq!(seen, (200, MARKED.to_owned()));
    assert_eq!(
        support::http1_get(addr, "/", &[]).await,
        (200, UNMARKED.to_owned())
    );
}

#[tokio::test]
async fn n4_plain_hyper_service_sees_the_http2_marker() {
    let addr = serve(NestedRetryLayer::new()).await;
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Empty<Bytes>>();

    for (marker, expected) in [(Some("1"), MARKED), (None, UNMARKED)] {
        let mut request = Request::get(format!("http://{addr}/"));
        if let Some(value) = marker {
            request = request.header(nresilience_axum::wire::MARKER, value);
        }
        let response = client
            .request(request.body(Empty::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.version(), http::Version::HTTP_2);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, expected);
    }
}

#[tokio::test]
async fn trust_boundary_plain_hyper_service_ignoring_inbound_sees_no_marker() {
    let addr = serve(NestedRetryLayer::new().ignore_inbound()).await;
    let seen = support::http1_get(addr, "/", &[b"x-nresilience-retrying: 1"]).await;
    assert_eq!(seen, (200, UNMARKED.to_owned()));
}
