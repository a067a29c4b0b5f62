//! The retry budget's per-operation cost, side by side with tower's `TpsBudget`.
//!
//! Every nresilience row reads `Instant::now()` per operation, because its caller must;
//! tower's budget reads the clock inside. Run: `cargo bench -p nresilience-core --bench budget`.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use nresilience_core::{BudgetOptions, Criticality, TokenBucket};
use tower::retry::budget::{Budget, TpsBudget};

/// One operation against a budget, as the benchmark drives it.
trait Subject: Send + Sync + 'static {
    fn deposit(&self);
    fn withdraw(&self) -> bool;
}

impl Subject for TokenBucket {
    fn deposit(&self) {
        Self::deposit(self, Instant::now());
    }
    fn withdraw(&self) -> bool {
        self.try_withdraw(Instant::now(), Criticality::Normal)
    }
}

impl Subject for TpsBudget {
    fn deposit(&self) {
        Budget::deposit(self);
    }
    fn withdraw(&self) -> bool {
        Budget::withdraw(self)
    }
}

/// Every deposit funds exactly one withdrawal, so `deposit + withdraw` stays granted.
fn funded() -> (Arc<TokenBucket>, Arc<TpsBudget>) {
    let ours = TokenBucket::new(BudgetOptions::default().fraction(1.0), Instant::now())
        .expect("valid options");
    let tower = TpsBudget::new(Duration::from_secs(10), 3, 1.0);
    (Arc::new(ours), Arc::new(tower))
}

/// Empty and unfunded: every withdrawal is refused, as in a storm.
fn exhausted() -> (Arc<TokenBucket>, Arc<TpsBudget>) {
    let now = Instant::now();
    let options = BudgetOptions::default().minimum_per_second(0.0);
    let ours = TokenBucket::new(options, now).expect("valid options");
    while ours.try_withdraw(now, Criticality::Normal) {}
    let tower = TpsBudget::new(Duration::from_secs(10), 0, 0.1);
    (Arc::new(ours), Arc::new(tower))
}

#[derive(Clone, Copy)]
enum Op {
    Deposit,
    DepositWithdraw,
    WithdrawRefused,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Self::Deposit => "deposit",
            Self::DepositWithdraw => "deposit+withdraw",
            Self::WithdrawRefused => "withdraw_refused",
        }
    }

    fn run<S: Subject + ?Sized>(self, subject: &S) {
        match self {
            Self::Deposit => subject.deposit(),
            Self::DepositWithdraw => {
                subject.deposit();
                black_box(subject.withdraw());
            }
            Self::WithdrawRefused => {
                black_box(subject.withdraw());
            }
        }
    }
}

/// Time per operation with `threads` threads hammering one budget at once.
fn contended<S: Subject>(subject: &Arc<S>, op: Op, threads: usize, iters: u64) -> Duration {
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let subject = Arc::clone(subject);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                for _ in 0..iters {
                    op.run(&*subject);
                }
                start.elapsed()
            })
        })
        .collect();
    let total: Duration = handles
        .into_iter()
        .map(|h| h.join().expect("bench thread"))
        .sum();
    total / threads as u32
}

fn bench(c: &mut Criterion) {
    for op in [Op::Deposit, Op::DepositWithdraw, Op::WithdrawRefused] {
        let mut group = c.benchmark_group(format!("budget/{}", op.name()));
        for threads in [1usize, 2] {
            let (ours, tower) = match op {
                Op::WithdrawRefused => exhausted(),
                _ => funded(),
            };
            group.bench_function(BenchmarkId::new("nresilience", threads), |b| {
                b.iter_custom(|iters| contended(&ours, op, threads, iters))
            });
            group.bench_function(BenchmarkId::new("tower_tps_budget", threads), |b| {
                b.iter_custom(|iters| contended(&tower, op, threads, iters))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
