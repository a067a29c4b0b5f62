//! A bounded table of values by key, the least recently used forgotten first: the per-host
//! state of an HTTP client (budgets, load) without growing with every host it meets.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// At most `max_keys` values, each made on its key's first use.
pub(crate) struct KeyTable<V> {
    values: HashMap<Box<str>, Tracked<V>, BuildHasherDefault<KeyHasher>>,
    /// Counts uses; each use stamps its key with the next value, so stamps are unique and
    /// the smallest marks the least recently used key.
    clock: u64,
}

struct Tracked<V> {
    value: Arc<V>,
    last_used: u64,
}

impl<V> Default for KeyTable<V> {
    fn default() -> Self {
        Self {
            values: HashMap::default(),
            clock: 0,
        }
    }
}

impl<V> KeyTable<V> {
    /// The value of `key`, made by `make` on its first use; a new key at a full table
    /// forgets the least recently used one first.
    pub(crate) fn get_or_make(
        &mut self,
        key: &str,
        max_keys: usize,
        make: impl FnOnce() -> V,
    ) -> Arc<V> {
        self.clock += 1;
        let stamp = self.clock;
        if let Some(tracked) = self.values.get_mut(key) {
            tracked.last_used = stamp;
            return Arc::clone(&tracked.value);
        }
        let value = Arc::new(make());
        if self.values.len() >= max_keys {
            self.forget_least_recently_used();
        }
        self.values.insert(
            key.into(),
            Tracked {
                value: Arc::clone(&value),
                last_used: stamp,
            },
        );
        value
    }

    /// Every key and its value, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.values
            .iter()
            .map(|(key, tracked)| (&**key, &*tracked.value))
    }

    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    fn forget_least_recently_used(&mut self) {
        let oldest = self.values.values().map(|tracked| tracked.last_used).min();
        if let Some(oldest) = oldest {
            // Stamps are unique: this removes exactly one key.
            self.values.retain(|_, tracked| tracked.last_used != oldest);
        }
    }
}

/// A multiply-rotate hash of eight bytes at a time: every call looks its key up, and SipHash
/// of a host name cost more than the rest of the lookup. Collisions cannot be made to cost
/// much: the table never holds more than `max_keys` keys.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for &byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
