//! `Client` over TLS (feature `rustls`): a local HTTPS server with a certificate made for the
//! test, trusted by the client's root store and by nothing else.

#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use nresilience_client::Client;
use nresilience_core::{Backoff, RetryPolicy, StopReason};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Answers `200` with the marker's value, or `-` without one.
async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let marker = request
        .headers()
        .get("x-nresilience-retrying")
        .map_or("-".to_owned(), |value| value.to_str().unwrap().to_owned());
    Ok(Response::new(Full::new(Bytes::from(marker))))
}

/// An HTTPS server for `localhost` on a free port, and the certificate it presents.
async fn https_server() -> (u16, CertificateDer<'static>) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let certificate = made.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certificate.clone()], key)
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that does not trust the certificate ends the handshake.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(answer);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, certificate)
}

fn trusting(certificates: &[CertificateDer<'static>]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in certificates {
        roots.add(certificate.clone()).unwrap();
    }
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

#[tokio::test]
async fn n1_a_get_over_https_carries_the_marker() {
    let (port, certificate) = https_server().await;
    let client = Client::builder(RetryPolicy::default()).build_tls(trusting(&[certificate]));
    let response = client
        .get(format!("https://localhost:{port}/"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"1", "the marker reached the server over TLS");
}

#[tokio::test]
async fn a_server_the_roots_do_not_trust_is_refused_on_every_attempt() {
    let (port, _) = https_server().await;
    let policy = RetryPolicy::builder()
        .backoff(Backoff::none())
        .build()
        .unwrap();
    let client = Client::builder(policy).build_tls(trusting(&[]));
    let error = client
        .get(format!("https://localhost:{port}/"))
        .await
        .unwrap_err();
    assert_eq!(error.reason(), StopReason::AttemptsExhausted);
    assert_eq!(
        error.attempts(),
        3,
        "a failed handshake is transient, as any connect error"
    );
}

#[tokio::test]
async fn the_tls_client_still_speaks_plain_http() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let service = hyper::service::service_fn(answer);
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(tcp), service)
            .await;
    });
    let client = Client::builder(RetryPolicy::default()).build_tls(trusting(&[]));
    let response = client
        .get(format!("http://127.0.0.1:{port}/"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}
