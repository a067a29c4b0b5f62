//! The retry budget's token bucket (SPEC B1–B9, B11, B13): `nresilience_core::TokenBucket`
//! driven by an arbitrary sequence of deposits, withdrawals (each with a criticality),
//! refunds, hints and reads, each after an arbitrary time step (forwards or backwards:
//! `Instant` arithmetic from the bucket's creation).
//!
//! Input, as text (so the seeds are readable): the first line is the options,
//! `<fraction> <minimum_per_second> [<capacity>|-]` (any `f64` spelling: invalid options must
//! be refused by `TokenBucket::new` exactly when `BudgetOptions::validate` refuses them);
//! every other line is one step, `<op> [<criticality>] [<time step>]`:
//! op `d` deposit, `w` try_withdraw, `r` refund, `h` retry_after_for, `b` balance,
//! `u` utilization; criticality `c`/`n`/`s` (default `n`); time step `+250ms`, `-3s`, `+7ns`
//! (units `ns us ms s m h d`), applied before the op.
//!
//! Asserts after every step:
//! - **the bound of B1–B3** (Finagle's, as in `bucket_tests.rs`, written independently of the
//!   implementation): retries granted so far ≤ capacity (B3, B4: starts full) + fraction ×
//!   deposits (B1) + floor × the latest time seen (B2) + refunds (B13), in exact nano-tokens;
//! - the balance never leaves [0, capacity] (B3) and utilization stays in [0, 1] (B11);
//! - the bucket agrees step by step with a model of the SPEC in exact `u128` nano-token
//!   arithmetic: full at the start (B4), a deposit adds `fraction` (B1), the floor accrues
//!   `rate × elapsed` since the refill point, capped (B2, B3), a time at or before the refill
//!   point accrues nothing and does not move it back (B6), a withdrawal takes one token (B5)
//!   and a sheddable one needs `1 + capacity/2` (B9), a refund returns one token (B13), and
//!   the hint is the floor's time to the missing token, `None` with a zero floor (B7);
//! - the hint (B7) is honest: when it is `Some(d)`, the model left alone for `d` (counted
//!   from the refill point, which is ahead of `now` after a step back) would grant the retry,
//!   and `d` is the first such nanosecond.
//!   A retry the bucket can never fund (a sheddable one when the capacity is under two
//!   tokens: it needs `1 + capacity/2`) has no hint.
#![no_main]

use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use nresilience_core::{BudgetOptions, Criticality, TokenBucket};
use nresilience_fuzz::lines;

const UNIT: u128 = 1_000_000_000;
/// How far a step may take the clock from the bucket's creation, either way: ±146 years.
const REACH: i128 = 1 << 62;

/// Tokens to nano-tokens, as the README's fixed point says: rounded to the nearest.
fn units(tokens: f64) -> u128 {
    (tokens * 1e9).round() as u64 as u128
}

#[derive(Clone, Debug)]
struct Model {
    capacity: u128,
    rate: u128,
    deposit: u128,
    balance: u128,
    /// Nanoseconds from the creation the floor has accrued up to.
    refilled_to: u128,
}

impl Model {
    fn new(options: &BudgetOptions) -> Self {
        let capacity = units(options.effective_capacity());
        Model {
            capacity,
            rate: units(options.minimum_per_second),
            deposit: units(options.fraction),
            balance: capacity,
            refilled_to: 0,
        }
    }

    fn accrue(&mut self, t: u128) {
        if self.rate == 0 || t <= self.refilled_to {
            return;
        }
        let accrued = ((t - self.refilled_to) * self.rate / UNIT).min(self.capacity);
        self.refilled_to = t;
        self.balance = (self.balance + accrued).min(self.capacity);
    }

    fn needed(&self, criticality: Criticality) -> u128 {
        match criticality {
            Criticality::Sheddable => UNIT + self.capacity / 2,
            Criticality::Critical | Criticality::Normal => UNIT,
        }
    }

    fn hint(&self, criticality: Criticality) -> Option<Duration> {
        let needed = self.needed(criticality);
        if needed > self.capacity {
            return None;
        }
        if self.balance >= needed {
            return Some(Duration::ZERO);
        }
        if self.rate == 0 {
            return None;
        }
        let nanos = ((needed - self.balance) * UNIT).div_ceil(self.rate);
        Some(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Deposit,
    Withdraw,
    Refund,
    Hint,
    Balance,
    Utilization,
}

fn step_nanos(token: &str) -> Option<i128> {
    let (sign, rest) = match token.as_bytes().first()? {
        b'+' => (1, &token[1..]),
        b'-' => (-1, &token[1..]),
        _ => return None,
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    let n: i128 = rest[..digits].parse().ok()?;
    let scale: i128 = match &rest[digits..] {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" | "" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return None,
    };
    Some(sign * n * scale)
}

fn parse_step(line: &str) -> Option<(Op, Criticality, i128)> {
    let mut tokens = line.split_ascii_whitespace();
    let op = match tokens.next()? {
        "d" => Op::Deposit,
        "w" => Op::Withdraw,
        "r" => Op::Refund,
        "h" => Op::Hint,
        "b" => Op::Balance,
        "u" => Op::Utilization,
        _ => return None,
    };
    let mut criticality = Criticality::Normal;
    let mut step = 0;
    for token in tokens {
        match token {
            "c" => criticality = Criticality::Critical,
            "n" => criticality = Criticality::Normal,
            "s" => criticality = Criticality::Sheddable,
            _ => step = step_nanos(token).unwrap_or(0),
        }
    }
    Some((op, criticality, step))
}

fn parse_options(line: &str) -> BudgetOptions {
    let mut tokens = line.split_ascii_whitespace();
    let mut options = BudgetOptions::new();
    if let Some(fraction) = tokens.next().and_then(|t| t.parse::<f64>().ok()) {
        options = options.fraction(fraction);
    }
    if let Some(floor) = tokens.next().and_then(|t| t.parse::<f64>().ok()) {
        options = options.minimum_per_second(floor);
    }
    if let Some(capacity) = tokens.next().and_then(|t| t.parse::<f64>().ok()) {
        options = options.capacity(capacity);
    }
    options
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut input = lines(text.as_bytes()).map(|line| std::str::from_utf8(line).unwrap_or(""));
    let options = parse_options(input.next().unwrap_or(""));
    let origin = Instant::now();
    let bucket = TokenBucket::new(options, origin);
    assert_eq!(bucket.is_ok(), options.validate().is_ok(), "{options:?}");
    let Ok(bucket) = bucket else {
        return;
    };
    let mut model = Model::new(&options);
    assert_eq!(
        bucket.capacity(),
        model.capacity as f64 / 1e9,
        "{options:?}"
    );
    assert!(model.capacity >= UNIT, "B3: never below one token");

    let (mut granted, mut deposits, mut refunds) = (0u128, 0u128, 0u128);
    let mut cursor: i128 = 0;
    let mut latest: u128 = 0;
    for (op, criticality, step) in input.filter_map(parse_step) {
        let next = (cursor + step).clamp(-REACH, REACH);
        let now = if next >= 0 {
            origin.checked_add(Duration::from_nanos(next as u64))
        } else {
            origin.checked_sub(Duration::from_nanos((-next) as u64))
        };
        let Some(now) = now else {
            continue;
        };
        cursor = next;
        // The bucket counts from its creation; an instant before it is the creation (B6).
        let t = cursor.max(0) as u128;
        latest = latest.max(t);
        model.accrue(t);
        match op {
            Op::Deposit => {
                bucket.deposit(now);
                deposits += 1;
                model.balance = (model.balance + model.deposit).min(model.capacity);
            }
            Op::Withdraw => {
                let grant = model.balance >= model.needed(criticality);
                assert_eq!(
                    bucket.try_withdraw(now, criticality),
                    grant,
                    "{criticality:?} withdrawal at {cursor} ns, model {model:?}, bucket {bucket:?}"
                );
                if grant {
                    granted += 1;
                    model.balance -= UNIT;
                }
            }
            Op::Refund => {
                bucket.refund();
                refunds += 1;
                model.balance = (model.balance + UNIT).min(model.capacity);
            }
            Op::Hint => {
                let hint = bucket.retry_after_for(now, criticality);
                assert_eq!(
                    hint,
                    model.hint(criticality),
                    "B7 {criticality:?} hint, model {model:?}"
                );
                if criticality == Criticality::Normal {
                    assert_eq!(bucket.retry_after(now), hint);
                }
                let needed = model.needed(criticality);
                if let Some(wait) = hint.filter(|wait| !wait.is_zero()) {
                    // The floor accrues from the refill point, which is ahead of `t` when
                    // time went backwards (B6): the hint counts from `now`, so it is short by
                    // that skew (docs/fuzzing.md); measure it from the refill point.
                    let from = t.max(model.refilled_to);
                    let mut later = model.clone();
                    later.accrue(from + wait.as_nanos());
                    assert!(
                        later.balance >= needed,
                        "B7: a {criticality:?} retry is not funded after its hint {wait:?}: \
                         balance {} of {needed} needed, capacity {}",
                        later.balance,
                        model.capacity
                    );
                    let mut sooner = model.clone();
                    sooner.accrue(from + wait.as_nanos() - 1);
                    assert!(
                        sooner.balance < needed,
                        "B7: the hint {wait:?} is not the first instant"
                    );
                }
            }
            Op::Balance => {}
            Op::Utilization => {
                let utilization = bucket.utilization(now);
                assert!((0.0..=1.0).contains(&utilization), "B11: {utilization}");
                assert_eq!(
                    utilization,
                    1.0 - model.balance as f64 / model.capacity as f64
                );
            }
        }
        // After every step.
        assert!(model.balance <= model.capacity);
        let balance = bucket.balance(now);
        assert_eq!(
            balance,
            model.balance as f64 / 1e9,
            "B1-B6 at {cursor} ns: model {model:?}"
        );
        assert!(
            (0.0..=bucket.capacity()).contains(&balance),
            "B3: {balance}"
        );
        let bound =
            model.capacity + deposits * model.deposit + refunds * UNIT + latest * model.rate / UNIT;
        assert!(
            granted * UNIT <= bound,
            "B1-B3: {granted} retries granted, bound {} tokens ({options:?}, {deposits} deposits, \
             {refunds} refunds, {latest} ns)",
            bound as f64 / 1e9
        );
    }
});
