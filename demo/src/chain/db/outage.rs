//! A `down` fault: db's listener closed and every connection dropped for the window, as a
//! crashed process's are, then a listener on the same port again, in the same process.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::super::server::Connections;
use super::super::Result;

/// How long db waits between tries to listen again when the port is not yet free.
const REBIND_PAUSE: Duration = Duration::from_millis(10);

/// Serves `app` on `addr` until `stop` completes, refusing connections from `outage.0` to
/// `outage.1`. Returns the address bound.
pub(super) async fn serve(
    app: Router,
    addr: SocketAddr,
    (down, up): (Instant, Instant),
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        tokio::pin!(stop);
        let mut connections = Connections::new();
        let stopped = connections
            .accept(&listener, &app, async {
                tokio::select! {
                    () = &mut stop => true,
                    () = tokio::time::sleep_until(down) => false,
                }
            })
            .await;
        drop(listener);
        if stopped {
            connections.drain().await;
            return;
        }
        connections.drop_all();
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep_until(up) => {}
        }
        let listener = loop {
            match TcpListener::bind(bound).await {
                Ok(listener) => break listener,
                Err(error) => {
                    tracing::warn!(%error, %bound, "db cannot listen again yet");
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(REBIND_PAUSE) => {}
                    }
                }
            }
        };
        connections.accept(&listener, &app, stop).await;
        drop(listener);
        connections.drain().await;
    });
    Ok(bound)
}
