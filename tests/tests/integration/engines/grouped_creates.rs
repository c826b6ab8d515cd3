//! What etcd's and ZooKeeper's grouped creates (issue 49: acquires that meet go to the engine
//! in one call) are tested by alike: sixteen seats acquired at once beside one held elsewhere,
//! attempts whose creates go over a link slower than the operation timeout, and a writer that
//! holds from its create's answer alone only when nothing stands ahead. Each engine's
//! test judges by its own store (etcd's `Txn` counter and revision, ZooKeeper's zxids and
//! create events): `engines/etcd/creates.rs`, `engines/zookeeper_creates.rs`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use leasehold::{LockError, LockGuard, Locker};
use leasehold_tests::harness::{ProxyMode, TcpProxy};

/// Sixteen tasks of `a` acquire `seat:0` to `seat:15` at once, `seat:3` held by `held` (a
/// guard of `b`, another locker). While the fifteen free seats are all granted and still held,
/// `meanwhile` reads the store (how many calls the creates took); then `held` is released and
/// seat 3 must be granted with a fence above its holder's, every fence is set, and every seat
/// is free after (taken and given back by `b`). Returns what `meanwhile` read.
pub(super) async fn seats_at_once<T, F>(
    a: &Locker,
    b: &Locker,
    held: LockGuard,
    meanwhile: impl FnOnce() -> F,
) -> T
where
    F: Future<Output = T>,
{
    const TASKS: usize = 16;
    let start = Arc::new(tokio::sync::Barrier::new(TASKS));
    // The fifteen free seats are held until all of them are granted, and read while held.
    let granted = Arc::new(tokio::sync::Barrier::new(TASKS));
    let read = Arc::new(tokio::sync::Barrier::new(TASKS));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (a, start) = (a.clone(), start.clone());
            let (granted, read) = (granted.clone(), read.clone());
            tokio::spawn(async move {
                start.wait().await;
                let g = a.lock(format!("seat:{i}")).acquire().await.unwrap();
                if i != 3 {
                    granted.wait().await;
                    read.wait().await;
                }
                let fence = g.fence();
                g.release().await.unwrap();
                fence
            })
        })
        .collect();
    // The fifteen are granted while seat 3 is still held (the barriers' last waits are ours).
    granted.wait().await;
    let seen = meanwhile().await;
    read.wait().await;
    let holders_fence = held.fence();
    held.release().await.unwrap();
    let mut fences = Vec::new();
    for t in tasks {
        fences.push(t.await.unwrap());
    }
    assert!(fences.iter().all(|&f| f > 0), "{fences:?}");
    assert!(
        fences[3] > holders_fence,
        "seat 3's fence {} after its holder's {holders_fence}",
        fences[3]
    );
    for i in 0..TASKS {
        let g = b.lock(format!("seat:{i}")).try_acquire().await.unwrap();
        assert!(g.is_some(), "seat {i} was left taken");
        g.unwrap().release().await.unwrap();
    }
    seen
}

/// How many attempts [`attempts_over_a_slow_link`] makes at once.
pub(super) const LATE: usize = 8;

/// `LATE` attempts of `a` at once, on `late:0` to `late:7`, over `proxy` slowed to a second
/// each way: the engine applies their creates a second after they were sent (the first alone,
/// the others together, in the call after it), and the answers would come a second later,
/// past the operation timeout (1.5 s), so each attempt must fail as unavailable, its outcome
/// unknown. The link is fast again on return.
pub(super) async fn attempts_over_a_slow_link(a: &Locker, proxy: &TcpProxy) {
    proxy.set_mode(ProxyMode::Delay(Duration::from_secs(1)));
    let tasks: Vec<_> = (0..LATE)
        .map(|i| {
            let a = a.clone();
            tokio::spawn(async move {
                a.lock(format!("late:{i}"))
                    .wait(Duration::from_millis(100))
                    .acquire()
                    .await
            })
        })
        .collect();
    for t in tasks {
        let outcome = t.await.unwrap();
        assert!(
            outcome.as_ref().is_err_and(LockError::is_unavailable),
            "not failed as unavailable over a link slower than the operation timeout: \
             {outcome:?}"
        );
    }
    proxy.set_mode(ProxyMode::Pass);
}

/// `cycles` uncontended cycles of `a` on the key `alone`, each fence above the last: what an
/// engine's request counter is read around.
pub(super) async fn cycles_alone(a: &Locker, cycles: u64) {
    let mut fence = 0;
    for _ in 0..cycles {
        let guard = a.lock("alone").acquire().await.unwrap();
        assert!(guard.fence() > fence, "fences rise from cycle to cycle");
        fence = guard.fence();
        guard.release().await.unwrap();
    }
}

/// A writer of `a` behind `key` held by `b` (a write lock, or a read lock with `read`) is
/// refused at once, and holds after the release with a fence above the holder's: a create's
/// answer tells a holder's place only when nothing stands ahead.
pub(super) async fn refused_behind_then_above(a: &Locker, b: &Locker, key: &str, read: bool) {
    let held = match read {
        true => b.read_lock(key).acquire().await.unwrap(),
        false => b.lock(key).acquire().await.unwrap(),
    };
    assert!(
        a.lock(key).try_acquire().await.unwrap().is_none(),
        "a writer was granted {key} while another locker held it"
    );
    let before = held.fence();
    held.release().await.unwrap();
    let next = a.lock(key).acquire().await.unwrap();
    assert!(
        next.fence() > before,
        "{key}: the next writer's fence {} is not above the holder's {before}",
        next.fence()
    );
    next.release().await.unwrap();
}
