//! The success path of one call: the closure alone, under nresilience's default policy, and
//! under backon's default `retry`, in the same run.
//!
//! Run: `cargo bench -p nresilience-core --bench execute`.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use backon::{ExponentialBuilder, Retryable};
use criterion::{criterion_group, criterion_main, Criterion};
use nresilience_core::RetryPolicy;

async fn work() -> Result<u64, std::io::Error> {
    Ok(black_box(1))
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let policy = RetryPolicy::builder()
        .name("bench")
        .build()
        .expect("valid policy");
    // As close to backon's defaults as the policy goes: no deadline, attempt timeout,
    // ceiling or budget.
    let bare = RetryPolicy::builder()
        .name("bench-bare")
        .deadline(None)
        .attempt_timeout(None)
        .attempt_ceiling(None)
        .budget(nresilience_core::RetryBudget::None)
        .build()
        .expect("valid policy");
    let mut group = c.benchmark_group("execute/success");
    group.bench_function("direct", |b| b.to_async(&runtime).iter(work));
    group.bench_function("nresilience", |b| {
        b.to_async(&runtime).iter(|| policy.execute(|_| work()))
    });
    group.bench_function("nresilience_bare", |b| {
        b.to_async(&runtime).iter(|| bare.execute(|_| work()))
    });
    group.bench_function("backon", |b| {
        b.to_async(&runtime)
            .iter(|| work.retry(ExponentialBuilder::default()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
