//! The source of owner-token secrets ([`Secrets`]): one per locker, kept by its identity and
//! used by every owner token it makes ([`token`](super::token)).

use std::fmt;
use std::sync::Mutex;

use chacha20::rand_core::{Rng, SeedableRng};
use chacha20::ChaCha20Rng;

/// One locker's source of owner-token secrets: ChaCha20 (20 rounds) keyed with 256 bits from
/// the operating system's random source when the locker is built, and never again.
///
/// Why this is as good as asking the operating system each time: the OS source is itself a
/// ChaCha20 generator keyed from entropy, and a ChaCha20 key stream is indistinguishable from
/// random bits to anyone who does not know the key (it is a stream cipher's key stream: telling
/// it apart would break the cipher). The key never leaves this process, and no output reveals
/// it, so a token seen in the store (an operator reads every holder's token) says nothing about
/// the next one, or about any other live token: guessing a live secret stays a 2^-128 chance per
/// guess. Uniqueness: the stream of one key does not repeat within 2^64 blocks of 64 bytes,
/// and two lockers have independent 256-bit keys, so two secrets are equal only by the chance of
/// two random 128-bit values (below 2^-60 for 2^34 acquisitions between them, the birthday
/// bound). A forked child would share the parent's state, but a locker does not survive a fork
/// anyway (its connections and background task stay with the parent): a child builds its own.
pub(crate) struct Secrets(Mutex<ChaCha20Rng>);

impl Secrets {
    /// A generator keyed from the operating system's random source.
    ///
    /// # Panics
    /// If the operating system's random source fails, which on supported platforms means the
    /// process cannot safely continue anyway.
    pub(crate) fn new() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source failed");
        Secrets::from_key(key)
    }

    /// A generator with the key `key` (tests use a known one).
    pub(crate) fn from_key(key: [u8; 32]) -> Self {
        Secrets(Mutex::new(ChaCha20Rng::from_seed(key)))
    }

    /// The next 16 bytes of the key stream.
    pub(crate) fn next(&self) -> [u8; 16] {
        let mut raw = [0u8; 16];
        // Held for one block copy at most; a poisoned lock still holds a valid generator.
        let mut rng = self.0.lock().unwrap_or_else(|e| e.into_inner());
        rng.fill_bytes(&mut raw);
        raw
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secrets(<redacted>)")
    }
}
