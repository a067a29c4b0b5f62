//! Serving a hop: HTTP/1 and HTTP/2 on one port, a bound on how long a connection may take
//! to send its request's headers, and a stop that lets requests in flight finish.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::Result;

/// How long a connection may take to send a request's headers before it is closed: a client
/// that sends half a header block holds a connection (and its memory) for no one.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a stopping server waits for the requests in flight.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `app` on `addr` until the process ends; returns the address bound.
pub async fn serve(app: Router, addr: SocketAddr) -> Result<SocketAddr> {
    serve_until(app, addr, std::future::pending()).await
}

/// Serves `app` on `addr` until `stop` completes, then lets the requests in flight finish
/// (for up to ten seconds); returns the address bound.
pub async fn serve_until(
    app: Router,
    addr: SocketAddr,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        let mut connections = Connections::new();
        connections.accept(&listener, &app, stop).await;
        drop(listener);
        connections.drain().await;
    });
    Ok(bound)
}

/// The connections a server has accepted, each served on a task of its own.
pub(super) struct Connections {
    builder: auto::Builder<TokioExecutor>,
    graceful: GracefulShutdown,
    tasks: JoinSet<()>,
}

impl Connections {
    pub(super) fn new() -> Self {
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
        Self {
            builder,
            graceful: GracefulShutdown::new(),
            tasks: JoinSet::new(),
        }
    }

    /// Serves `app` on what `listener` accepts until `until` completes, and returns what it
    /// completed with.
    pub(super) async fn accept<T>(
        &mut self,
        listener: &TcpListener,
        app: &Router,
        until: impl Future<Output = T>,
    ) -> T {
        tokio::pin!(until);
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // Out of file descriptors, say: wait, rather than spin on the error.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                done = &mut until => return done,
            };
            while self.tasks.try_join_next().is_some() {}
            let service = TowerToHyperService::new(app.clone());
            let connection = self
                .builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .into_owned();
            let connection = self.graceful.watch(connection);
            self.tasks.spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "connection ended with an error");
                }
            });
        }
    }

    /// Closes every connection at once, requests in flight included, as a crash would.
    pub(super) fn drop_all(&mut self) {
        self.tasks.abort_all();
    }

    /// Lets the requests in flight finish, for up to ten seconds.
    pub(super) async fn drain(self) {
        let _ = tokio::time::timeout(DRAIN, self.graceful.shutdown()).await;
    }
}
