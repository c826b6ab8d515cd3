//! Property 28, the options whose meaning depends on the engine (the options × primitives
//! matrix runs whole on the core, `leasehold::kernel::tests::matrix`; these cells are the ones
//! an engine keeps by its own means): `hold_at_least` keeps a lock, a read, a write and a
//! downgrade (the write's hold, and the read's own) taken after an early release, until the
//! hold ends, by an expiry where locks expire and by a release from the locker where they live
//! with the session; then they come free.
//!
//! Judged by the store's answers only: another locker's writer that is let in must have been
//! answered after the hold's end (counted from before the hold was taken), however slow the
//! machine; and it must be let in at last.

use std::time::Duration;

use leasehold::{LockError, LockGuard, Locker};
use leasehold_tests::conformance::Engine;
use tokio::time::Instant;

use super::support::SLACK;

const HOLD: Duration = Duration::from_millis(1_500);

/// What is taken with the hold.
#[derive(Clone, Copy, Debug)]
enum Held {
    Lock,
    Read,
    Write,
    /// A write with the hold, downgraded: the write released first, then the read.
    DowngradedWrite,
    /// A downgrade whose read has the hold.
    DowngradedRead,
}

pub async fn holds_on_every_primitive(engine: &Engine) {
    let a = engine.locker().await;
    let b = engine.locker().await;
    tokio::join!(
        held_until_the_hold_ends(&a, &b, "opt:lock", Held::Lock),
        held_until_the_hold_ends(&a, &b, "opt:read", Held::Read),
        held_until_the_hold_ends(&a, &b, "opt:write", Held::Write),
        held_until_the_hold_ends(&a, &b, "opt:down-w", Held::DowngradedWrite),
        held_until_the_hold_ends(&a, &b, "opt:down-r", Held::DowngradedRead),
    );
}

/// `a` takes `key` as `held` says with a hold and releases it at once; `b`'s writer is not let
/// in before the hold's end, and is let in after it.
async fn held_until_the_hold_ends(a: &Locker, b: &Locker, key: &str, held: Held) {
    let taken = Instant::now();
    let guard = take(a, key, held).await;
    guard.release().await.expect("release");
    loop {
        let got = b.write_lock(key).try_acquire().await;
        let answered = taken.elapsed();
        match got {
            Ok(Some(guard)) => {
                assert!(
                    answered >= HOLD,
                    "{held:?}: another locker's writer got in {answered:?} after the hold of \
                     {HOLD:?} was taken"
                );
                guard.release().await.expect("release");
                return;
            }
            // No answer in time (a loaded machine) grants nothing: asked again.
            Ok(None) | Err(LockError::Unavailable { .. }) => assert!(
                answered < HOLD * 4 + SLACK,
                "{held:?}: still taken {answered:?} after the hold of {HOLD:?} was taken"
            ),
            Err(e) => panic!("{held:?}: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Takes `key` as `held` says; for a downgrade, releases the write and returns the read.
async fn take(a: &Locker, key: &str, held: Held) -> LockGuard {
    let acquired = match held {
        Held::Lock => a.lock(key).hold_at_least(HOLD).acquire().await,
        Held::Read => a.read_lock(key).hold_at_least(HOLD).acquire().await,
        Held::Write => a.write_lock(key).hold_at_least(HOLD).acquire().await,
        Held::DowngradedWrite | Held::DowngradedRead => {
            let (write_hold, read_hold) = match held {
                Held::DowngradedWrite => (HOLD, Duration::ZERO),
                _ => (Duration::ZERO, HOLD),
            };
            let write = a
                .write_lock(key)
                .hold_at_least(write_hold)
                .acquire()
                .await
                .expect("the write");
            let read = write
                .scope(async { a.read_lock(key).hold_at_least(read_hold).acquire().await })
                .await
                .expect("a read inside the held write");
            write.release().await.expect("the write's release");
            Ok(read)
        }
    };
    acquired.unwrap_or_else(|e| panic!("{held:?}: {e}"))
}
