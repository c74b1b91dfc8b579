//! Byte-capped memo maps with least-recently-used eviction.
//!
//! The engine's caches (walk entries, the subtree memo, the row memo) are
//! memos of pure functions, so dropping an entry costs only its
//! recomputation, never a different mask. Each is an [`Lru`]: a map whose
//! values carry their size in bytes and the tick of their last use. A read
//! stamps the value with a fresh tick through an atomic (so lookups need only
//! a shared borrow, a read lock in the callers); an insert that would pass
//! the cap first evicts the least recently used values until the map holds at
//! most [`KEEP`] of the cap, so eviction (a sort of the ticks, O(n log n))
//! runs once per quarter of the cap inserted, O(log n) amortized per insert.
//!
//! Invariants (`check_invariants`): `bytes` is the sum of the values' sizes
//! and never exceeds the cap after an insert returns (a single value larger
//! than the cap is not kept).

use std::borrow::Borrow;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cache::FxMap;

/// The share of the cap an eviction leaves (3/4).
pub const KEEP: (usize, usize) = (3, 4);

#[derive(Debug)]
struct Slot<V> {
    value: V,
    size: usize,
    used: AtomicU64,
}

/// A byte-capped map with LRU eviction (see the module header).
#[derive(Debug)]
pub struct Lru<K, V> {
    map: FxMap<K, Slot<V>>,
    bytes: usize,
    cap: usize,
    clock: AtomicU64,
    evicted: u64,
}

impl<K: Hash + Eq, V> Lru<K, V> {
    /// An empty map holding at most `cap` bytes of values.
    pub fn new(cap: usize) -> Self {
        Self {
            map: FxMap::default(),
            bytes: 0,
            cap,
            clock: AtomicU64::new(0),
            evicted: 0,
        }
    }

    /// The value under `key`, marked as just used.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.map.get(key)?;
        slot.used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        Some(&slot.value)
    }

    /// [`Self::get`] through an exclusive borrow: the same stamp, without the
    /// atomic read-modify-write a shared borrow needs.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let tick = self.clock.get_mut();
        *tick += 1;
        let now = *tick - 1;
        let slot = self.map.get(key)?;
        slot.used.store(now, Ordering::Relaxed);
        Some(&slot.value)
    }

    /// Keep `value` (of `size` bytes) under `key` unless a value is there
    /// already (memos publish idempotently); returns the value kept, or None
    /// when `value` alone is larger than the cap (then nothing is kept).
    pub fn insert(&mut self, key: K, value: V, size: usize) -> Option<&V> {
        if self.map.contains_key(&key) {
            return self.get(&key);
        }
        if size > self.cap {
            return None;
        }
        if self.bytes + size > self.cap {
            let keep = self.cap / KEEP.1 * KEEP.0;
            self.evict(keep.saturating_sub(size));
        }
        self.bytes += size;
        let used = AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed));
        let slot = self.map.entry(key).or_insert(Slot { value, size, used });
        Some(&slot.value)
    }

    /// Drop the least recently used values until at most `target` bytes stay.
    fn evict(&mut self, target: usize) {
        let mut ticks: Vec<(u64, usize)> = self
            .map
            .values()
            .map(|s| (s.used.load(Ordering::Relaxed), s.size))
            .collect();
        ticks.sort_unstable();
        let mut bytes = self.bytes;
        let mut threshold = 0;
        for &(tick, size) in &ticks {
            if bytes <= target {
                break;
            }
            bytes -= size;
            threshold = tick + 1;
        }
        let before = self.map.len();
        self.map
            .retain(|_, s| s.used.load(Ordering::Relaxed) >= threshold);
        self.evicted += (before - self.map.len()) as u64;
        self.bytes = self.map.values().map(|s| s.size).sum();
    }

    /// Take the value under `key` out of the map (not counted as evicted).
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.map.remove(key)?;
        self.bytes -= slot.size;
        Some(slot.value)
    }

    /// Drop everything (the eviction count stays).
    pub fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }

    /// Change the cap, evicting at once if the map holds more.
    pub fn set_cap(&mut self, cap: usize) {
        self.cap = cap;
        if self.bytes > cap {
            self.evict(cap / KEEP.1 * KEEP.0);
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Values evicted so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// (bytes held, cap, values evicted so far).
    pub fn usage(&self) -> (usize, usize, u64) {
        (self.bytes, self.cap, self.evicted)
    }

    /// Assert the invariants of the module header (for tests).
    pub fn check_invariants(&self) {
        assert_eq!(self.bytes, self.map.values().map(|s| s.size).sum::<usize>());
        assert!(
            self.bytes <= self.cap,
            "{} bytes over a cap of {}",
            self.bytes,
            self.cap
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_first() {
        let mut m: Lru<u32, u32> = Lru::new(100);
        for k in 0..10 {
            m.insert(k, k, 10);
        }
        assert_eq!((m.len(), m.bytes()), (10, 100));
        assert_eq!(m.get(&0), Some(&0)); // 0 is now the most recent
        m.insert(10, 10, 10); // over the cap: evict down to 75 - 10 bytes
        m.check_invariants();
        assert!(m.get(&0).is_some(), "the value just used stays");
        assert!(m.get(&10).is_some(), "the value inserted stays");
        assert!(
            m.get(&1).is_none() && m.get(&2).is_none(),
            "the oldest go first"
        );
        assert!(m.bytes() <= 75);
        assert!(m.evicted() >= 3);
    }

    #[test]
    fn inserts_are_idempotent_and_oversized_values_are_not_kept() {
        let mut m: Lru<&str, u32> = Lru::new(50);
        assert_eq!(m.insert("a", 1, 10), Some(&1));
        assert_eq!(m.insert("a", 2, 10), Some(&1));
        assert_eq!(m.insert("big", 3, 51), None);
        assert_eq!((m.len(), m.bytes()), (1, 10));
        m.set_cap(5);
        m.check_invariants();
        assert!(m.is_empty());
    }

    /// The reference the map is checked against: its values in order of use
    /// (least recent first), the eviction rule of the module header stated
    /// plainly (drop the least recent until the bytes are at most the target).
    #[derive(Default)]
    struct Model {
        order: Vec<(u32, u32, usize)>,
        cap: usize,
        evicted: u64,
    }

    impl Model {
        fn bytes(&self) -> usize {
            self.order.iter().map(|e| e.2).sum()
        }

        fn touch(&mut self, key: u32) -> Option<u32> {
            let at = self.order.iter().position(|e| e.0 == key)?;
            let e = self.order.remove(at);
            self.order.push(e);
            Some(e.1)
        }

        fn evict_to(&mut self, target: usize) {
            while self.bytes() > target {
                self.order.remove(0);
                self.evicted += 1;
            }
        }

        fn insert(&mut self, key: u32, value: u32, size: usize) -> Option<u32> {
            if self.order.iter().any(|e| e.0 == key) {
                return self.touch(key);
            }
            if size > self.cap {
                return None;
            }
            if self.bytes() + size > self.cap {
                self.evict_to((self.cap / 4 * 3).saturating_sub(size));
            }
            self.order.push((key, value, size));
            Some(value)
        }

        fn remove(&mut self, key: u32) -> Option<u32> {
            let at = self.order.iter().position(|e| e.0 == key)?;
            Some(self.order.remove(at).1)
        }

        fn set_cap(&mut self, cap: usize) {
            self.cap = cap;
            if self.bytes() > cap {
                self.evict_to(cap / 4 * 3);
            }
        }
    }

    /// Every read-only view of `m` agrees with the model's.
    fn same(m: &Lru<u32, u32>, model: &Model, op: &str) {
        m.check_invariants();
        let mut keys: Vec<u32> = m.map.keys().copied().collect();
        let mut want: Vec<u32> = model.order.iter().map(|e| e.0).collect();
        keys.sort_unstable();
        want.sort_unstable();
        assert_eq!(keys, want, "after {op}");
        assert_eq!(
            (m.len(), m.is_empty(), m.bytes(), m.cap(), m.evicted()),
            (
                want.len(),
                want.is_empty(),
                model.bytes(),
                model.cap,
                model.evicted
            ),
            "after {op}"
        );
        assert_eq!(m.usage(), (m.bytes(), m.cap(), m.evicted()));
    }

    #[test]
    fn random_operations_agree_with_a_plain_lru() {
        // Sizes in steps of 5 and caps that are multiples of 5 (and 4) make a
        // value land exactly on the cap, where `>` and `>=` part.
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..200 {
            let cap = [0, 5, 20, 60, 100][round % 5];
            let mut m: Lru<u32, u32> = Lru::new(cap);
            let mut model = Model {
                cap,
                ..Model::default()
            };
            for step in 0..60 {
                let key = next(12) as u32;
                let value = next(1000) as u32;
                let op = match next(10) {
                    0..=3 => {
                        let size = 5 * next(6) as usize;
                        let got = m.insert(key, value, size).copied();
                        assert_eq!(got, model.insert(key, value, size), "insert {key}");
                        "insert"
                    }
                    4 | 5 => {
                        assert_eq!(m.get(&key).copied(), model.touch(key), "get {key}");
                        "get"
                    }
                    6 => {
                        assert_eq!(m.get_mut(&key).copied(), model.touch(key), "get_mut {key}");
                        "get_mut"
                    }
                    7 => {
                        assert_eq!(m.remove(&key), model.remove(key), "remove {key}");
                        "remove"
                    }
                    8 => {
                        // Down to the bytes held (no eviction), below, or up.
                        let cap = [m.bytes(), m.bytes().saturating_sub(5), cap, 2 * cap]
                            [next(4) as usize];
                        m.set_cap(cap);
                        model.set_cap(cap);
                        "set_cap"
                    }
                    _ if step % 29 == 0 => {
                        m.clear();
                        model.order.clear();
                        "clear"
                    }
                    _ => "nothing",
                };
                same(&m, &model, &format!("round {round} step {step}: {op}"));
            }
        }
    }

    #[test]
    fn a_broken_byte_count_fails_the_invariants() {
        let mut m: Lru<u32, u32> = Lru::new(100);
        m.insert(1, 1, 10);
        m.bytes += 1;
        let broken =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.check_invariants()));
        assert!(
            broken.is_err(),
            "check_invariants missed a wrong byte count"
        );
        let mut m: Lru<u32, u32> = Lru::new(100);
        m.insert(1, 1, 10);
        m.cap = 5;
        let over = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.check_invariants()));
        assert!(over.is_err(), "check_invariants missed bytes over the cap");
    }

    #[test]
    fn a_working_set_under_the_cap_is_never_evicted() {
        // A repeated corpus that fits is served from the map every time.
        let mut m: Lru<u32, u32> = Lru::new(1000);
        for round in 0..5 {
            for k in 0..50 {
                if m.get(&k).is_none() {
                    assert_eq!(round, 0, "key {k} missed on round {round}");
                    m.insert(k, k, 10);
                }
            }
        }
        assert_eq!(m.evicted(), 0);
    }
}
