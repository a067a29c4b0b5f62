//! A hello-world axum server, with or without `NestedRetryLayer`: the server `benches/wrk.sh`
//! loads. Listens on 127.0.0.1 only and exits after `--seconds`.
//!
//! `--layer off` serves the bare router, `on` adds `NestedRetryLayer` with `Router::layer`,
//! `identity` adds a layer that does nothing that way (what any `Router::layer` costs in axum),
//! `around` wraps the whole router in `NestedRetry` instead.
//!
//! ```text
//! cargo run --release -p nresilience-axum --example wrk_server -- --layer on --port 0 --seconds 30
//! ```

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::Request;
use axum::response::Response;
use axum::routing::get;
use axum::{Router, ServiceExt};
use nresilience_axum::NestedRetryLayer;
use tower::layer::util::Identity;
use tower::{Layer, Service};

#[derive(Clone, Copy)]
enum Wrapping {
    Off,
    Identity,
    On,
    Around,
}

struct Args {
    layer: Wrapping,
    port: u16,
    seconds: u64,
    threads: usize,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        layer: Wrapping::Off,
        port: 0,
        seconds: 60,
        threads: 1,
    };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |_| format!("bad value for {flag}: {value}");
        match flag.as_str() {
            "--layer" => {
                args.layer = match value.as_str() {
                    "off" => Wrapping::Off,
                    "identity" => Wrapping::Identity,
                    "on" => Wrapping::On,
                    "around" => Wrapping::Around,
                    _ => {
                        return Err(format!(
                            "--layer is off, identity, on or around, not {value}"
                        ))
                    }
                }
            }
            "--port" => args.port = value.parse().map_err(bad)?,
            "--seconds" => args.seconds = value.parse().map_err(bad)?,
            "--threads" => args.threads = value.parse().map_err(bad)?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse()?;
    let app = Router::new().route("/", get(|| async { "Hello, World!" }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()?;
    match args.layer {
        Wrapping::Off => runtime.block_on(serve(app, &args)),
        Wrapping::Identity => runtime.block_on(serve(app.layer(Identity::new()), &args)),
        Wrapping::On => runtime.block_on(serve(app.layer(NestedRetryLayer::new()), &args)),
        Wrapping::Around => runtime.block_on(serve(NestedRetryLayer::new().layer(app), &args)),
    }
}

async fn serve<S>(service: S, args: &Args) -> Result<(), Box<dyn std::error::Error>>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    println!("listening on {}", listener.local_addr()?);
    let serve = axum::serve(listener, service.into_make_service());
    // Bounded in time: a forgotten bench server does not outlive its run.
    let _ = tokio::time::timeout(Duration::from_secs(args.seconds), serve).await;
    Ok(())
}
