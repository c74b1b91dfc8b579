//! The shared tier: a family's walk cache (grid-core's T2) on a Redis server,
//! shared by every replica of a deployment.
//!
//! The engine's local walk cache stays in front ([`crate::engine::Engine::entry`]):
//! Redis is read only on a local miss, and a miss in both is walked locally
//! and published once. Publication is single-flight across processes: the
//! walker takes a short-lived lock (`SET lock <token> NX PX lock_ms`, the
//! token fresh for each acquisition: [`Token`]) and releases it only while it
//! still holds that token (compare-and-delete in one `EVAL`), so a walker that
//! outlives `lock_ms` never deletes the next holder's lock. A process that
//! finds the lock held polls every `poll_us`, for at most `wait_ms`, for the
//! entry and for the lock: the entry there is a wait hit; the lock gone with
//! no entry (its holder died or outlived `lock_ms` unpublished) ends the wait:
//! it takes the lock itself, walks and publishes ([`Counter::WaitTakeovers`]);
//! at `wait_ms` it walks locally without publishing.
//!
//! **Keys.** Every key starts with the tier's prefix
//! `grid:<deployment>:<family>:<FORMAT>.<ABI_VERSION>.<crate version>:`, where
//! `<deployment>` is 16 hex digits of HMAC-SHA256(deployment key, "grid
//! deployment") and `<family>` 16 hex digits of BLAKE2b of the family
//! fingerprint (DFA and trie), so a new grammar family, a new entry format, a
//! new key layout or another release of the walk starts an empty namespace
//! (replicas of two releases never share entries during a rollout). An entry lives at `prefix e:<h>`, its lock at
//! `prefix l:<h>`, `h` the hex BLAKE2b-128 of grid-core's canonical key
//! (namespace, root, form, allowed set, and the lexicon fingerprint at an
//! identifier position): the key every process computes alike.
//!
//! **Value** (format [`FORMAT`]): `"GRW" FORMAT | entry id (16) | encoding
//! (1) | payload length (u32 LE) | payload (grid-core's bytes) | CD count (u32)
//! | per CD entry: node, terminal, tail length (u32 each), tail | HMAC (32)`.
//! The HMAC is HMAC-SHA256 under the deployment key of `len(redis key) (u32)
//! | redis key | everything before it`, so an entry cannot be moved to
//! another key or written by a process without the key.
//!
//! **Trust.** An entry read is used only when, in this order, its HMAC
//! verifies, it parses whole, its payload is canonical for the vocabulary
//! ([`Payload::from_bytes`]) and its CD entries name trie nodes and
//! terminals that exist, and its entry id recomputed from the canonical key,
//! encoding and content equals the one it carries. Anything else is a
//! rejected entry ([`Counter::Rejected`], an event) and a local walk, never
//! a mask; the walk is published over it when this process gets the lock.
//!
//! **Faults.** A command that fails (refused connection, timeout, closed
//! socket, error reply) costs its caller a local walk, never an error: the
//! connection is dropped, counted ([`Counter::Errors`]), reported as an event,
//! and not retried before a backoff (`backoff_ms`, doubling up to
//! `backoff_max_ms`; calls meanwhile are [`Counter::Skipped`]). A connection
//! that breaks on reuse (a restarted server: closed or reset, not a timeout)
//! is reopened at once, once; a command that timed out is not sent again (the
//! server may have run it, and a stalled server would cost it twice).
//! A command's whole exchange, reply included, takes at most `timeout_ms`
//! ([`crate::resp`]), and the one connection is used by one thread at a
//! time: a thread that finds it busy for `timeout_ms` does not send its
//! command ([`Counter::Busy`]) and walks locally, so a stalled server costs
//! each command a bounded number of timeouts (its turn, opening a connection
//! when there is none: connect, AUTH, SELECT, and the command itself),
//! whatever the number of threads.
//! Events are kept in a bounded queue ([`Remote::next_event`]) which the
//! Python side drains into `logging`.

use std::collections::hash_map::RandomState;
use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::cache::{Classes, Entry, Payload};
use crate::engine::lock;
use crate::hash::{blake2b, Hasher};
use crate::resp::{Conn, Reply, Url};
use crate::trie::Trie;
use crate::walk::CdEntry;

/// The entry format (the value's layout); part of every key's prefix.
pub const FORMAT: u8 = 1;

/// Shortest deployment key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 16;

/// Events kept for [`Remote::next_event`] before the oldest are dropped.
pub const EVENTS_KEPT: usize = 256;

const MAC_BYTES: usize = 32;

/// Deletes `KEYS[1]` only while it holds `ARGV[1]`: the release of a lock.
const RELEASE: &[u8] =
    b"if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";

/// The tier's timing settings, from the URL's query (`name=value`, integers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `timeout_ms` (100): connect, read and write timeout of each command.
    pub timeout: Duration,
    /// `backoff_ms` (100): the first wait before a failed server is retried.
    pub backoff: Duration,
    /// `backoff_max_ms` (5000): the longest such wait.
    pub backoff_max: Duration,
    /// `lock_ms` (2000): how long a walker's lock lives.
    pub lock_ttl: Duration,
    /// `wait_ms` (20): how long a process waits on another's lock.
    pub wait: Duration,
    /// `poll_us` (250): how often it looks for the entry meanwhile.
    pub poll: Duration,
}

impl Settings {
    fn of_query(query: &[(String, String)]) -> Result<Self, String> {
        let mut s = Self {
            timeout: Duration::from_millis(100),
            backoff: Duration::from_millis(100),
            backoff_max: Duration::from_millis(5000),
            lock_ttl: Duration::from_millis(2000),
            wait: Duration::from_millis(20),
            poll: Duration::from_micros(250),
        };
        for (name, value) in query {
            let n: u64 = value
                .parse()
                .map_err(|_| format!("shared cache setting {name}={value:?} is not a number"))?;
            match name.as_str() {
                "timeout_ms" => s.timeout = Duration::from_millis(n.max(1)),
                "backoff_ms" => s.backoff = Duration::from_millis(n),
                "backoff_max_ms" => s.backoff_max = Duration::from_millis(n),
                "lock_ms" => s.lock_ttl = Duration::from_millis(n.max(1)),
                "wait_ms" => s.wait = Duration::from_millis(n),
                "poll_us" => s.poll = Duration::from_micros(n.max(1)),
                _ => return Err(format!("unknown shared cache setting {name:?}")),
            }
        }
        Ok(s)
    }
}

/// What the tier counts (read with [`Remote::metrics`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Local misses looked up in Redis.
    Lookups,
    /// Lookups that found an entry and used it.
    Hits,
    /// Lookups that found none.
    Misses,
    /// Entries read and refused (HMAC, format, content or id).
    Rejected,
    /// Entries this process walked and stored.
    Published,
    /// Misses that found another process's lock and waited.
    Waits,
    /// Waits that ended with the other process's entry.
    WaitHits,
    /// Waits that ended at `wait_ms` with a local walk.
    WaitTimeouts,
    /// Waits that found the lock gone and no entry, and took the lock
    /// (then walked and published here).
    WaitTakeovers,
    /// Commands or connections that failed.
    Errors,
    /// Commands not sent: the server is in its backoff.
    Skipped,
    /// Commands not sent: another thread's command held the connection for
    /// a whole timeout.
    Busy,
    /// Connections reopened after a failure.
    Reconnects,
}

const COUNTERS: [(Counter, &str); 13] = [
    (Counter::Lookups, "lookups"),
    (Counter::Hits, "hits"),
    (Counter::Misses, "misses"),
    (Counter::Rejected, "rejected"),
    (Counter::Published, "published"),
    (Counter::Waits, "waits"),
    (Counter::WaitHits, "wait_hits"),
    (Counter::WaitTimeouts, "wait_timeouts"),
    (Counter::WaitTakeovers, "wait_takeovers"),
    (Counter::Errors, "errors"),
    (Counter::Skipped, "skipped"),
    (Counter::Reconnects, "reconnects"),
    (Counter::Busy, "busy"),
];

/// Why an entry read was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// No HMAC, or not the deployment key's.
    Mac,
    /// Not a whole entry of this format.
    Format,
    /// A payload not canonical for the vocabulary, or a CD entry naming a
    /// node or terminal that does not exist.
    Content,
    /// The entry id does not match the key and content.
    Id,
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rejection::Mac => "HMAC missing or wrong",
            Rejection::Format => "not an entry of this format",
            Rejection::Content => "payload or CD entries out of range",
            Rejection::Id => "entry id does not match its key and content",
        })
    }
}

/// What one acquisition of a walker's lock stores as the lock's value: 32
/// hex digits, BLAKE2b-128 of two OS-seeded SipHash outputs ([`RandomState`]),
/// the process id, the time and a process-wide count, so no other
/// acquisition, in this process or another on any machine, holds the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    fn fresh() -> Self {
        static ACQUIRED: AtomicU64 = AtomicU64::new(0);
        let n = ACQUIRED.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mut h = Hasher::<16>::new();
        for _ in 0..2 {
            h.update(&RandomState::new().hash_one((pid, nanos, n)).to_le_bytes());
        }
        h.update(&pid.to_le_bytes());
        h.update(&nanos.to_le_bytes());
        h.update(&n.to_le_bytes());
        Token(hex(&h.finalize()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The outcome of taking a walker's lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Taken by this acquisition, which holds `Token`.
    Taken(Token),
    /// Another process walks this key.
    Held,
    /// The server did not answer.
    Unavailable,
}

/// The outcome of one read.
#[derive(Debug)]
pub enum Read {
    Found(Entry),
    Missing,
    /// An entry was there and was refused (counted and reported).
    Rejected,
    /// The server did not answer.
    Failed,
}

/// The Redis keys of one walk: its entry's and its lock's.
#[derive(Clone, Debug)]
pub struct Keys {
    pub entry: Vec<u8>,
    pub lock: Vec<u8>,
}

#[derive(Debug)]
struct Link {
    conn: Option<Conn>,
    /// Not before this instant after a failure.
    retry_at: Option<Instant>,
    backoff: Duration,
    /// The last attempt failed (the next success is a reconnection).
    down: bool,
}

/// A thread's turn on a [`Remote`]'s connection, given back when dropped.
struct Turn<'a>(&'a Remote);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *lock(&self.0.busy) = false;
        self.0.free.notify_one();
    }
}

/// A family's shared tier on one Redis server (see the module header).
#[derive(Debug)]
pub struct Remote {
    url: Url,
    pub settings: Settings,
    mac_key: Vec<u8>,
    prefix: String,
    link: Mutex<Link>,
    /// Whether a thread is using `link` (held across a command's I/O), and
    /// the condition a waiting thread is woken by when it is released.
    busy: Mutex<bool>,
    free: Condvar,
    counters: [AtomicU64; COUNTERS.len()],
    events: Mutex<VecDeque<String>>,
    ready: Condvar,
}

/// A command's deadline passed (the reply did not come in time), as opposed to a
/// connection that was closed or reset.
fn timed_out(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Remote {
    /// The tier of family `family` at `url` under deployment key `key`.
    /// Nothing is connected yet. A URL that does not parse, an unknown or
    /// non-numeric setting, or a key shorter than [`MIN_KEY_BYTES`] is an
    /// error naming it.
    pub fn new(url: &str, key: &[u8], family: &str) -> Result<Self, String> {
        let url = Url::parse(url)?;
        let settings = Settings::of_query(&url.query)?;
        if key.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the shared cache key has {} bytes; at least {MIN_KEY_BYTES} are needed",
                key.len()
            ));
        }
        let mut deployment = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
        deployment.update(b"grid deployment");
        let deployment = deployment.finalize().into_bytes();
        let family_hash = blake2b::<8>(family.as_bytes());
        let prefix = format!(
            "grid:{}:{}:{FORMAT}.{}.{}:",
            hex(&deployment[..8]),
            hex(&family_hash),
            crate::ABI_VERSION,
            env!("CARGO_PKG_VERSION")
        );
        Ok(Self {
            link: Mutex::new(Link {
                conn: None,
                retry_at: None,
                backoff: settings.backoff,
                down: false,
            }),
            busy: Mutex::new(false),
            free: Condvar::new(),
            url,
            settings,
            mac_key: key.to_vec(),
            prefix,
            counters: Default::default(),
            events: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
        })
    }

    /// The prefix of every key of this tier.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The Redis keys of the walk whose canonical key is `canonical`.
    pub fn keys(&self, canonical: &[u8]) -> Keys {
        let h = hex(&blake2b::<16>(canonical));
        Keys {
            entry: format!("{}e:{h}", self.prefix).into_bytes(),
            lock: format!("{}l:{h}", self.prefix).into_bytes(),
        }
    }

    pub fn bump(&self, c: Counter) {
        self.counters[c as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Every counter by name.
    pub fn metrics(&self) -> Vec<(&'static str, u64)> {
        COUNTERS
            .iter()
            .map(|&(c, name)| (name, self.counters[c as usize].load(Ordering::Relaxed)))
            .collect()
    }

    fn event(&self, message: String) {
        let mut events = lock(&self.events);
        if events.len() == EVENTS_KEPT {
            events.pop_front();
        }
        events.push_back(message);
        self.ready.notify_all();
    }

    /// The oldest event not yet taken, waiting at most `timeout` for one.
    pub fn next_event(&self, timeout: Duration) -> Option<String> {
        let events = lock(&self.events);
        let (mut events, _) = self
            .ready
            .wait_timeout_while(events, timeout, |e| e.is_empty())
            .unwrap_or_else(|e| e.into_inner());
        events.pop_front()
    }

    fn fail(&self, link: &mut Link, what: &str, error: &std::io::Error) {
        self.bump(Counter::Errors);
        link.conn = None;
        link.retry_at = Some(Instant::now() + link.backoff);
        self.event(format!(
            "shared cache at {}: {what} failed ({error}); local walks only for {:?}",
            self.url.address(),
            link.backoff
        ));
        link.backoff = (link.backoff * 2).min(self.settings.backoff_max);
        link.down = true;
    }

    /// This thread's turn on the connection, waiting at most a timeout for
    /// another thread's command to end; None when it did not.
    fn turn(&self) -> Option<Turn<'_>> {
        let busy = lock(&self.busy);
        let (mut busy, _) = self
            .free
            .wait_timeout_while(busy, self.settings.timeout, |b| *b)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *busy {
            return None;
        }
        *busy = true;
        Some(Turn(self))
    }

    /// One command's reply, or None when the server is in its backoff or the
    /// command failed (counted and reported).
    fn call(&self, args: &[&[u8]]) -> Option<Reply> {
        let Some(_turn) = self.turn() else {
            self.bump(Counter::Busy);
            return None;
        };
        let mut link = lock(&self.link);
        for _ in 0..2 {
            let fresh = link.conn.is_none();
            if fresh {
                if link.retry_at.is_some_and(|t| Instant::now() < t) {
                    self.bump(Counter::Skipped);
                    return None;
                }
                match Conn::open(&self.url, self.settings.timeout) {
                    Ok(conn) => link.conn = Some(conn),
                    Err(e) => {
                        self.fail(&mut link, "connect", &e);
                        return None;
                    }
                }
                if link.down {
                    self.bump(Counter::Reconnects);
                    self.event(format!(
                        "shared cache at {}: reconnected",
                        self.url.address()
                    ));
                }
                link.down = false;
                link.retry_at = None;
                link.backoff = self.settings.backoff;
            }
            let conn = link.conn.as_mut().expect("connected above");
            match conn.call(args) {
                Ok(Reply::Error(e)) => {
                    self.bump(Counter::Errors);
                    self.event(format!("shared cache at {}: {e}", self.url.address()));
                    return None;
                }
                Ok(reply) => return Some(reply),
                // A connection that breaks on reuse (a restarted server): once more, fresh.
                Err(e) if !fresh && !timed_out(&e) => link.conn = None,
                Err(e) => {
                    self.fail(&mut link, "command", &e);
                    return None;
                }
            }
        }
        None
    }

    /// Read the entry at `keys` and check it (module header) against the
    /// canonical key `canonical`, the vocabulary of `trie` and `n_terminals`;
    /// its classes are interned in `classes`.
    pub fn read(
        &self,
        keys: &Keys,
        canonical: &[u8],
        trie: &Trie,
        n_terminals: usize,
        classes: &Classes,
    ) -> Read {
        match self.call(&[b"GET", &keys.entry]) {
            Some(Reply::Bulk(Some(value))) => {
                match self.open(&keys.entry, &value, canonical, trie, n_terminals, classes) {
                    Ok(entry) => Read::Found(entry),
                    Err(why) => {
                        self.bump(Counter::Rejected);
                        self.event(format!(
                            "shared cache: rejected entry {}: {why}",
                            String::from_utf8_lossy(&keys.entry)
                        ));
                        Read::Rejected
                    }
                }
            }
            Some(Reply::Bulk(None)) => Read::Missing,
            _ => Read::Failed,
        }
    }

    /// Take the walker's lock of `keys` under a fresh [`Token`], for `lock_ms`.
    pub fn try_lock(&self, keys: &Keys) -> Lock {
        let ttl = self.settings.lock_ttl.as_millis().to_string();
        let token = Token::fresh();
        let set = [
            &b"SET"[..],
            &keys.lock,
            token.0.as_bytes(),
            b"NX",
            b"PX",
            ttl.as_bytes(),
        ];
        match self.call(&set) {
            Some(Reply::Status(_)) => Lock::Taken(token),
            Some(Reply::Bulk(None)) => Lock::Held,
            _ => Lock::Unavailable,
        }
    }

    /// Whether the lock of `keys` is held (by anyone); None when the server
    /// did not answer.
    pub fn lock_held(&self, keys: &Keys) -> Option<bool> {
        match self.call(&[b"EXISTS", &keys.lock]) {
            Some(Reply::Int(n)) => Some(n > 0),
            _ => None,
        }
    }

    /// Store `entry` (walked under the lock of `keys` taken with `token`, its
    /// id already computed), then release the lock if it still holds `token`
    /// (another acquisition's lock, after this one's expired, is left alone).
    pub fn publish(
        &self,
        keys: &Keys,
        token: &Token,
        entry: &Entry,
        id: &[u8; 16],
        n_vocab: usize,
    ) {
        let value = self.seal(&keys.entry, entry, id, n_vocab);
        if let Some(Reply::Status(_)) = self.call(&[b"SET", &keys.entry, &value]) {
            self.bump(Counter::Published);
        }
        self.release(keys, token);
    }

    /// Delete the lock of `keys` if it holds `token`, atomically.
    pub fn release(&self, keys: &Keys, token: &Token) {
        self.call(&[b"EVAL", RELEASE, b"1", &keys.lock, token.0.as_bytes()]);
    }

    fn mac(&self, key: &[u8], body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.mac_key).expect("HMAC takes any key");
        mac.update(&(key.len() as u32).to_le_bytes());
        mac.update(key);
        mac.update(body);
        mac
    }

    /// The value stored for `entry` at Redis key `key` (module header).
    pub fn seal(&self, key: &[u8], entry: &Entry, id: &[u8; 16], n_vocab: usize) -> Vec<u8> {
        let payload = entry.ci.to_bytes(n_vocab);
        let mut out =
            Vec::with_capacity(32 + payload.len() + entry.tails.len() + 12 * entry.cd.len());
        out.extend_from_slice(b"GRW");
        out.push(FORMAT);
        out.extend_from_slice(id);
        out.push(entry.ci.encoding);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&payload);
        out.extend_from_slice(&(entry.cd.len() as u32).to_le_bytes());
        for e in &entry.cd {
            let tail = entry.tail(e);
            for x in [e.node, e.terminal, tail.len() as u32] {
                out.extend_from_slice(&x.to_le_bytes());
            }
            out.extend_from_slice(tail);
        }
        let mac = self.mac(key, &out).finalize().into_bytes();
        out.extend_from_slice(&mac);
        out
    }

    /// The entry `value` read at `key` holds, checked (module header).
    pub fn open(
        &self,
        key: &[u8],
        value: &[u8],
        canonical: &[u8],
        trie: &Trie,
        n_terminals: usize,
        classes: &Classes,
    ) -> Result<Entry, Rejection> {
        let split = value.len().checked_sub(MAC_BYTES).ok_or(Rejection::Mac)?;
        let (body, mac) = value.split_at(split);
        self.mac(key, body)
            .verify_slice(mac)
            .map_err(|_| Rejection::Mac)?;
        let mut r = Reader(body);
        if r.take(4) != Some(&[b'G', b'R', b'W', FORMAT][..]) {
            return Err(Rejection::Format);
        }
        let id: [u8; 16] = r.take(16).ok_or(Rejection::Format)?.try_into().expect("16");
        let encoding = r.take(1).ok_or(Rejection::Format)?[0];
        let n = r.u32()? as usize;
        let payload = r.take(n).ok_or(Rejection::Format)?;
        let n_cd = r.u32()? as usize;
        if n_cd > r.0.len() / 12 {
            return Err(Rejection::Format);
        }
        let (mut cd, mut tails) = (Vec::with_capacity(n_cd), Vec::new());
        for _ in 0..n_cd {
            let (node, terminal, len) = (r.u32()?, r.u32()?, r.u32()? as usize);
            let tail = r.take(len).ok_or(Rejection::Format)?;
            if node as usize >= trie.n_nodes() || terminal as usize >= n_terminals {
                return Err(Rejection::Content);
            }
            let tail_start = tails.len() as u32;
            tails.extend_from_slice(tail);
            cd.push(CdEntry {
                node,
                terminal,
                tail_start,
                tail_end: tails.len() as u32,
            });
        }
        if !r.0.is_empty() {
            return Err(Rejection::Format);
        }
        let n_vocab = trie.n_vocab();
        let ci = Payload::from_bytes(encoding, payload, n_vocab).ok_or(Rejection::Content)?;
        let entry = Entry::new(ci, cd, tails, classes);
        if entry.entry_id(canonical, n_vocab) != id {
            return Err(Rejection::Id);
        }
        Ok(entry)
    }
}

/// A cursor over a value's bytes.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Result<u32, Rejection> {
        let b = self.take(4).ok_or(Rejection::Format)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_keys_are_checked() {
        assert!(Remote::new("redis://h", b"short", "f").is_err());
        assert!(Remote::new("redis://h?wait_ms=x", &[7; 16], "f").is_err());
        assert!(Remote::new("redis://h?nope=1", &[7; 16], "f").is_err());
        let r = Remote::new("redis://h?wait_ms=0&backoff_ms=0", &[7; 16], "f").unwrap();
        assert_eq!(
            (r.settings.wait, r.settings.backoff),
            (Duration::ZERO, Duration::ZERO)
        );
        let other_family = Remote::new("redis://h", &[7; 16], "g").unwrap();
        let other_key = Remote::new("redis://h", &[8; 16], "f").unwrap();
        assert_ne!(r.prefix(), other_family.prefix());
        assert_ne!(r.prefix(), other_key.prefix());
        let keys = r.keys(b"canonical");
        assert!(keys.entry.starts_with(r.prefix().as_bytes()));
        assert_ne!(keys.entry, r.keys(b"canonical2").entry);
    }

    #[test]
    fn an_unreachable_server_costs_a_counted_failure_then_backs_off() {
        // Port 1 on loopback: nothing listens there.
        let r = Remote::new("redis://127.0.0.1:1?backoff_ms=60000", &[7; 16], "f").unwrap();
        let keys = r.keys(b"k");
        let classes = Classes::default();
        let trie = tiny_trie();
        assert!(matches!(
            r.read(&keys, b"k", &trie, 1, &classes),
            Read::Failed
        ));
        assert!(matches!(
            r.read(&keys, b"k", &trie, 1, &classes),
            Read::Failed
        ));
        let m: std::collections::HashMap<_, _> = r.metrics().into_iter().collect();
        assert_eq!((m["errors"], m["skipped"]), (1, 1));
        assert!(r
            .next_event(Duration::ZERO)
            .unwrap()
            .contains("connect failed"));
    }

    fn tiny_trie() -> Trie {
        let spellings: [&[u8]; 4] = [b"ab", b"a", b"b", b"x"];
        Trie::new(crate::trie::RawTrie::pack(&spellings, &[false; 4])).unwrap()
    }

    /// A `redis-server` of a test's own on a free loopback port, killed on
    /// drop.
    struct Server {
        child: std::process::Child,
        url: Url,
    }

    impl Server {
        /// None (the test then checks nothing) where `redis-server` is not
        /// installed, unless GRID_REQUIRE_REDIS=1; grid-core's
        /// tests/test_shared_cache.py covers the tier end to end.
        fn start() -> Option<Self> {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let spawned = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(std::env::temp_dir())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
            let child = match spawned {
                Ok(child) => child,
                Err(e) if std::env::var("GRID_REQUIRE_REDIS").as_deref() != Ok("1") => {
                    eprintln!("redis-server not started ({e}): skipped");
                    return None;
                }
                Err(e) => panic!("redis-server not started ({e}) with GRID_REQUIRE_REDIS=1"),
            };
            let server = Server {
                child,
                url: Url::parse(&format!("redis://127.0.0.1:{port}")).unwrap(),
            };
            for _ in 0..1000 {
                if server.command(&[b"PING"]).is_some() {
                    return Some(server);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("redis-server did not answer PING");
        }

        fn command(&self, args: &[&[u8]]) -> Option<Reply> {
            let mut conn = Conn::open(&self.url, Duration::from_secs(5)).ok()?;
            conn.call(args).ok()
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    #[test]
    fn a_lock_is_released_only_by_the_acquisition_that_holds_it() {
        let Some(server) = Server::start() else {
            return;
        };
        let url = format!("redis://127.0.0.1:{}", server.url.port);
        let r = Remote::new(&url, &[7; 16], "f").unwrap();
        let keys = r.keys(b"key");
        let lock_value = || match server.command(&[b"GET", &keys.lock]) {
            Some(Reply::Bulk(v)) => v,
            other => panic!("GET lock: {other:?}"),
        };
        let Lock::Taken(first) = r.try_lock(&keys) else {
            panic!("a free lock is taken");
        };
        assert_eq!(lock_value().as_deref(), Some(first.as_str().as_bytes()));
        assert_eq!(r.try_lock(&keys), Lock::Held);
        assert_eq!(r.lock_held(&keys), Some(true));
        // The first acquisition's lock expires (here: goes) and another takes it.
        assert_eq!(server.command(&[b"DEL", &keys.lock]), Some(Reply::Int(1)));
        let Lock::Taken(second) = r.try_lock(&keys) else {
            panic!("a free lock is taken");
        };
        assert_ne!(first, second);
        // The first walker publishes late: its entry is stored, the lock kept.
        let entry = Entry::new(
            Payload::of_ids(4, vec![3]),
            vec![],
            vec![],
            &Classes::default(),
        );
        let id = entry.entry_id(b"key", 4);
        r.publish(&keys, &first, &entry, &id, 4);
        assert_eq!(lock_value().as_deref(), Some(second.as_str().as_bytes()));
        assert!(matches!(
            server.command(&[b"EXISTS", &keys.entry]),
            Some(Reply::Int(1))
        ));
        r.release(&keys, &second);
        assert_eq!(lock_value(), None);
        assert_eq!(r.lock_held(&keys), Some(false));
        let m: std::collections::HashMap<_, _> = r.metrics().into_iter().collect();
        assert_eq!((m["published"], m["errors"]), (1, 0));
    }

    #[test]
    fn sealed_entries_open_and_tampered_ones_are_rejected() {
        let r = Remote::new("redis://h", &[7; 16], "f").unwrap();
        let (trie, classes) = (tiny_trie(), Classes::default());
        let cd = vec![CdEntry {
            node: 1,
            terminal: 2,
            tail_start: 0,
            tail_end: 1,
        }];
        let entry = Entry::new(Payload::of_ids(4, vec![3]), cd, b"b".to_vec(), &classes);
        let id = entry.entry_id(b"key", 4);
        let keys = r.keys(b"key");
        let value = r.seal(&keys.entry, &entry, &id, 4);
        let open = |v: &[u8], canonical: &[u8]| {
            r.open(&keys.entry, v, canonical, &trie, 3, &classes)
                .map(|e| (e.ci.ids(), e.cd.len(), e.tails.clone()))
        };
        assert_eq!(open(&value, b"key"), Ok((vec![3], 1, b"b".to_vec())));
        // Another key's canonical form: the id no longer matches.
        assert_eq!(open(&value, b"other"), Err(Rejection::Id));
        // Any flipped byte breaks the HMAC; so do a missing one and another key.
        for i in [0, 5, 21, value.len() - 1] {
            let mut bad = value.clone();
            bad[i] ^= 1;
            assert_eq!(open(&bad, b"key"), Err(Rejection::Mac), "byte {i}");
        }
        assert_eq!(
            open(&value[..value.len() - 32], b"key"),
            Err(Rejection::Mac)
        );
        let stranger = Remote::new("redis://h", &[9; 16], "f").unwrap();
        let forged = stranger.seal(&keys.entry, &entry, &id, 4);
        assert_eq!(open(&forged, b"key"), Err(Rejection::Mac));
        // Moved to another Redis key: the HMAC covers the key.
        let moved = r.seal(&r.keys(b"elsewhere").entry, &entry, &id, 4);
        assert_eq!(open(&moved, b"key"), Err(Rejection::Mac));
        // Signed with the key but out of range, or with another id: refused.
        let far = Entry::new(
            Payload::of_ids(4, vec![3]),
            vec![CdEntry {
                node: 99,
                terminal: 2,
                tail_start: 0,
                tail_end: 0,
            }],
            vec![],
            &classes,
        );
        let far_id = far.entry_id(b"key", 4);
        assert_eq!(
            open(&r.seal(&keys.entry, &far, &far_id, 4), b"key"),
            Err(Rejection::Content)
        );
        assert_eq!(
            open(&r.seal(&keys.entry, &entry, &[0; 16], 4), b"key"),
            Err(Rejection::Id)
        );
    }
}
