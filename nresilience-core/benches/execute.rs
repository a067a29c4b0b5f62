//! The success path of one call: the closure alone, under nresilience's default policy (with
//! the no-op meter provider, and recording into the OpenTelemetry SDK's; with hedging at p95,
//! configured but not triggered; and with overload control turned off), and under backon's
//! default `retry`, in the same run.
//!
//! Run: `cargo bench -p nresilience-core --bench execute`.
//!
//! On a shared 2-core machine wall times move by more than the differences measured here, so
//! each row can also be counted in instructions, which other work on the machine does not move:
//!
//! ```text
//! cargo bench -p nresilience-core --bench execute --no-run
//! NRESILIENCE_COUNT=nresilience valgrind --tool=callgrind --collect-atstart=no \
//!     --toggle-collect=execute::counted --callgrind-out-file=/dev/null \
//!     target/release/deps/execute-<hash>
//! ```
//!
//! valgrind's `Collected` line, divided by the 10,000 calls printed, is instructions per call.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::future::Future;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use criterion::{criterion_group, Criterion};
use nresilience_core::{Hedge, RetryPolicy};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tokio::runtime::Runtime;

async fn work() -> Result<u64, std::io::Error> {
    Ok(black_box(1))
}

/// Calls in a counted run.
const COUNTED: u32 = 10_000;

/// The default policy, and one as close to backon's defaults as the policy goes: no
/// deadline, attempt timeout, ceiling or budget.
fn policies() -> (RetryPolicy, RetryPolicy) {
    let policy = RetryPolicy::builder()
        .name("bench")
        .build()
        .expect("valid policy");
    let bare = RetryPolicy::builder()
        .name("bench-bare")
        .deadline(None)
        .attempt_timeout(None)
        .attempt_ceiling(None)
        .budget(nresilience_core::RetryBudget::None)
        .build()
        .expect("valid policy");
    (policy, bare)
}

/// The default policy recording into a real meter provider (the OpenTelemetry SDK's, with a
/// reader that exports once an hour), installed as the global one the first time this is
/// asked for: a policy takes its instruments when it is built, and rows built before keep
/// the no-op ones.
fn recording_policy() -> &'static RetryPolicy {
    static POLICY: OnceLock<RetryPolicy> = OnceLock::new();
    POLICY.get_or_init(|| {
        let reader = PeriodicReader::builder(InMemoryMetricExporter::default())
            .with_interval(Duration::from_secs(3600))
            .build();
        let provider = SdkMeterProvider::builder().with_reader(reader).build();
        opentelemetry::global::set_meter_provider(provider);
        RetryPolicy::builder()
            .name("bench-recording")
            .build()
            .expect("valid policy")
    })
}

/// Each row, boxed alike for counting: a name and one call of it.
fn rows(runtime: &Runtime, row: &mut Row<'_>) {
    let (policy, bare) = policies();
    row(runtime, "direct", &|| {
        Box::pin(async { drop(work().await) })
    });
    row(runtime, "nresilience", &|| {
        let policy = policy.clone();
        Box::pin(async move { drop(policy.execute(|_| work()).await) })
    });
    let hedging = policy
        .to_builder()
        .name("bench-hedging")
        .hedge(Some(Hedge::default()))
        .build()
        .expect("valid policy");
    row(runtime, "nresilience_hedging", &|| {
        let hedging = hedging.clone();
        Box::pin(async move { drop(hedging.execute(|_| work()).await) })
    });
    let no_overload = policy
        .to_builder()
        .name("bench-no-overload")
        .overload_control(None)
        .build()
        .expect("valid policy");
    row(runtime, "nresilience_no_overload", &|| {
        let no_overload = no_overload.clone();
        Box::pin(async move { drop(no_overload.execute(|_| work()).await) })
    });
    row(runtime, "nresilience_bare", &|| {
        let bare = bare.clone();
        Box::pin(async move { drop(bare.execute(|_| work()).await) })
    });
    row(runtime, "nresilience_recording", &|| {
        let policy = recording_policy().clone();
        Box::pin(async move { drop(policy.execute(|_| work()).await) })
    });
    row(runtime, "backon", &|| {
        Box::pin(async { drop(work.retry(ExponentialBuilder::default()).await) })
    });
}

type Call = std::pin::Pin<Box<dyn Future<Output = ()>>>;

/// What [`rows`] does with each row: count it, or skip it.
type Row<'a> = dyn FnMut(&Runtime, &str, &dyn Fn() -> Call) + 'a;

fn bench(c: &mut Criterion) {
    let runtime = runtime();
    let (policy, bare) = policies();
    let mut group = c.benchmark_group("execute/success");
    group.bench_function("direct", |b| b.to_async(&runtime).iter(work));
    group.bench_function("nresilience", |b| {
        b.to_async(&runtime).iter(|| policy.execute(|_| work()))
    });
    group.bench_function("nresilience_bare", |b| {
        b.to_async(&runtime).iter(|| bare.execute(|_| work()))
    });
    group.bench_function("nresilience_recording", |b| {
        let policy = recording_policy();
        b.to_async(&runtime).iter(|| policy.execute(|_| work()))
    });
    group.bench_function("backon", |b| {
        b.to_async(&runtime)
            .iter(|| work.retry(ExponentialBuilder::default()))
    });
    group.finish();
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

/// The only function valgrind counts in (`--toggle-collect=execute::counted`). The calls are
/// boxed the same way in every row, so the difference between rows is the call's own cost.
#[inline(never)]
fn counted(runtime: &Runtime, call: &dyn Fn() -> Call) {
    runtime.block_on(async {
        for _ in 0..COUNTED {
            call().await;
        }
    });
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(wanted) = std::env::var("NRESILIENCE_COUNT") {
        let runtime = runtime();
        rows(&runtime, &mut |runtime, name, call| {
            if name == wanted {
                // Warm: the first calls make the bucket, the latency window, the span callsites.
                for _ in 0..COUNTED / 10 {
                    runtime.block_on(call());
                }
                counted(runtime, call);
                println!("{name}\t{COUNTED} calls");
            }
        });
    } else {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
}
