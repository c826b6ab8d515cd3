//! Property 20, a forced release is seen at once by the forced-out process's own waiters: an operator
//! deletes a lock (`force_release`) while its holder's process has a task queued behind it;
//! the release heard in the engine has the holder's lease verified at once, so the lease is
//! reported lost and the queued task gets the lock within [`HANDOVER`], not a third of the
//! lease later (the next renewal). Property 27: every task of the holder's process that asks
//! afterwards, for every primitive with a lock to force, gets in as one of another process
//! would ([`seen_by_every_task_at_once`]).

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::conformance::{Engine, EngineKind, PREFIX};
use tokio::time::{sleep, timeout, Instant};

use super::support::{CONTENDER_WAIT, HANDOVER, LONG_LEASE};

pub async fn seen_by_the_holders_process(engine: &Engine) {
    let holder = engine.locker().await;
    let operator = engine.locker().await;
    let key = "forced";
    let guard = holder
        .lock(key)
        .lease(LONG_LEASE)
        .acquire()
        .await
        .expect("a free lock");
    let queued = {
        let locker = holder.clone();
        tokio::spawn(async move {
            let got = locker
                .lock(key)
                .lease(LONG_LEASE)
                .wait(CONTENDER_WAIT)
                .acquire()
                .await;
            (got, Instant::now())
        })
    };
    // Queued behind the holder in its process (and subscribed to the lock's releases).
    sleep(Duration::from_millis(500)).await;
    assert!(!queued.is_finished(), "the queued task got a held lock");
    let forced = Instant::now();
    assert!(
        operator.force_release(key).await.expect("force_release"),
        "there was a lock to release"
    );
    timeout(HANDOVER, guard.lost()).await.unwrap_or_else(|_| {
        panic!("the forced-out guard still trusts its lease after {HANDOVER:?}")
    });
    assert!(!guard.is_held());
    let (got, at) = queued.await.expect("the queued task");
    let next = got.unwrap_or_else(|e| panic!("the queued task did not get the lock: {e}"));
    let took = at - forced;
    assert!(
        took < HANDOVER,
        "the forced-out process's queued task got the lock {took:?} after the forced release"
    );
    assert!(next.fence() > guard.fence());
    next.release().await.expect("release");
    drop(guard);
}

/// Engines where no operator can force a release through a locker (memory: the locks live in
/// one process; RedLock: each node is forced with a locker of its own) refuse it clearly.
pub async fn refused_clearly(engine: &Engine) {
    let locker = engine.locker().await;
    let err = locker
        .force_release("forced")
        .await
        .expect_err("no forced release through this locker");
    assert!(
        matches!(err, leasehold::LockError::Config { .. }),
        "{err:?}"
    );
}

/// A primitive whose lock an operator releases by force in [`seen_by_every_task_at_once`].
#[derive(Clone, Copy, Debug)]
enum Primitive {
    Lock,
    WriteLock,
    Unfenced,
    /// `lock_all` of two keys; the first is forced.
    LockAll,
    /// A read lock; the task that asks afterwards wants the write lock.
    ReadLock,
}

/// What the holder holds.
enum Holding {
    Guard(leasehold::LockGuard),
    Unfenced(leasehold::UnfencedGuard),
    All(leasehold::MultiGuard),
}

impl Holding {
    fn is_held(&self) -> bool {
        match self {
            Holding::Guard(g) => g.is_held(),
            Holding::Unfenced(g) => g.is_held(),
            Holding::All(g) => g.is_held(),
        }
    }
}

async fn hold(locker: &Locker, primitive: Primitive, key: &str, lease: Duration) -> Holding {
    let held = match primitive {
        Primitive::Lock => locker
            .lock(key)
            .lease(lease)
            .acquire()
            .await
            .map(Holding::Guard),
        Primitive::WriteLock => locker
            .write_lock(key)
            .lease(lease)
            .acquire()
            .await
            .map(Holding::Guard),
        Primitive::ReadLock => locker
            .read_lock(key)
            .lease(lease)
            .acquire()
            .await
            .map(Holding::Guard),
        Primitive::Unfenced => locker
            .lock(key)
            .lease(lease)
            .unfenced()
            .acquire()
            .await
            .map(Holding::Unfenced),
        Primitive::LockAll => locker
            .lock_all([key.to_owned(), format!("{key}:2")])
            .lease(lease)
            .acquire()
            .await
            .map(Holding::All),
    };
    held.unwrap_or_else(|e| panic!("{primitive:?} of a free {key}: {e}"))
}

/// Whether a task of its own (outside any holder's scope) gets `key` from `locker` at once, as
/// the task after a `primitive`'s holder asks for it (the write lock after a reader), and
/// gives it back.
async fn taken_at_once(locker: &Locker, primitive: Primitive, key: &str) -> bool {
    let (locker, key) = (locker.clone(), key.to_owned());
    tokio::spawn(async move {
        match primitive {
            Primitive::Unfenced => match locker.lock(&key).unfenced().try_acquire().await {
                Ok(Some(g)) => g.release().await.is_ok(),
                Ok(None) => false,
                Err(e) => panic!("try_acquire: {e}"),
            },
            Primitive::Lock | Primitive::LockAll => match locker.lock(&key).try_acquire().await {
                Ok(Some(g)) => g.release().await.is_ok(),
                Ok(None) => false,
                Err(e) => panic!("try_acquire: {e}"),
            },
            Primitive::WriteLock | Primitive::ReadLock => {
                match locker.write_lock(&key).try_acquire().await {
                    Ok(Some(g)) => g.release().await.is_ok(),
                    Ok(None) => false,
                    Err(e) => panic!("try_acquire: {e}"),
                }
            }
        }
    })
    .await
    .expect("the asking task")
}

/// Who releases locks by force: a locker of the engine, or on a RedLock one locker per node
/// (a RedLock locker refuses it: each node is forced on its own).
enum Operator {
    One(Locker),
    EachNode(Vec<Locker>),
}

impl Operator {
    async fn of(engine: &Engine) -> Operator {
        if engine.kind() != EngineKind::RedLock3 {
            return Operator::One(engine.locker().await);
        }
        let mut nodes = Vec::new();
        for addr in engine.server_addrs() {
            let node = Locker::builder()
                .url(format!("redis://{addr}"))
                .prefix(PREFIX)
                .build()
                .await
                .expect("a locker of one RedLock node");
            nodes.push(node);
        }
        Operator::EachNode(nodes)
    }

    /// Releases `key` by force; whether there was a lock to release (on a majority of
    /// RedLock's nodes).
    async fn force(&self, key: &str) -> bool {
        match self {
            Operator::One(locker) => locker.force_release(key).await.expect("force_release"),
            Operator::EachNode(nodes) => {
                let mut released = 0;
                for node in nodes {
                    released += usize::from(node.force_release(key).await.expect("force_release"));
                }
                released > nodes.len() / 2
            }
        }
    }
}

/// Property 27, a forced release is seen by every task of the holder's process as soon as by
/// any other process (issue 46; Redisson's `testForceUnlock`, whose second lock comes from the
/// same client): for the lock, the write lock, an unfenced lock, one key of `lock_all` and the
/// read lock, an operator releases a holder's lock by force, and at once a task of the holder's
/// own locker asks for it (`try_acquire`; the write lock after a reader). It gets it, as a task
/// of another locker then does; the holder of an exclusive lock counts its lease lost from
/// that moment. Judged by what the engine answered in that order, with no clock: before, the
/// holder's locker answered "busy" from its own bookkeeping (the holder's lease, trusted until
/// its next renewal, a third of the lease later) while another locker got in. Then the same
/// with a task that waits instead, behind a holder whose lease nothing renews (before, it
/// waited for that lease's end); and with the holder's own locker as the operator: its holder
/// counts the lease lost once the forced release returned.
pub async fn seen_by_every_task_at_once(engine: &Engine) {
    // Leases whose first renewal (a third of them) comes after everything here, on a session
    // that carries them where the session bounds the lease (ZooKeeper, etcd): only the store's
    // answer to a task that asks can tell the holder's process of the forced release.
    let unrenewed = Duration::from_secs(30);
    let holders = engine
        .builder()
        .session_timeout(unrenewed * 2)
        .build()
        .await
        .expect("a locker with a long session");
    let others = engine.locker().await;
    let operator = Operator::of(engine).await;
    for primitive in [
        Primitive::Lock,
        Primitive::WriteLock,
        Primitive::Unfenced,
        Primitive::LockAll,
        Primitive::ReadLock,
    ] {
        let key = format!("forced:{primitive:?}");
        let held = hold(&holders, primitive, &key, unrenewed).await;
        assert!(
            operator.force(&key).await,
            "{primitive:?}: there was a lock to release"
        );
        let mine = taken_at_once(&holders, primitive, &key).await;
        let theirs = taken_at_once(&others, primitive, &key).await;
        assert!(
            mine,
            "on {}, after a forced release of a {primitive:?}, a task of the holder's process \
             was refused (a task of another process then got in: {theirs})",
            engine.kind()
        );
        assert!(theirs, "{primitive:?}: another process after the holder's");
        if !matches!(primitive, Primitive::ReadLock) {
            assert!(
                !held.is_held(),
                "{primitive:?}: the holder still trusts its lease after its process was told"
            );
        }
        drop(held);
    }

    // A task that waits for the lock, arriving after the forced release (whose wake-up it
    // could not hear), behind a holder whose lease nothing renews and that outlasts the wait:
    // it gets the lock before its wait ends, which only the store's answer can tell it.
    let key = "forced:waiting";
    let guard = holders
        .lock(key)
        .lease(unrenewed)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    assert!(operator.force(key).await, "there was a lock to release");
    let waiting = {
        let locker = holders.clone();
        tokio::spawn(async move {
            locker
                .lock(key)
                .lease(LONG_LEASE)
                .wait(unrenewed / 2)
                .acquire()
                .await
        })
    };
    let next = waiting.await.unwrap().unwrap_or_else(|e| {
        panic!(
            "on {}, a waiting task of the holder's process did not get a lock released by \
             force: {e}",
            engine.kind()
        )
    });
    assert!(!guard.is_held(), "the holder still trusts its lease");
    assert!(next.fence() > guard.fence());
    next.release().await.unwrap();
    drop(guard);

    // The holder's own locker releases by force (Redisson's `forceUnlock` on the holder's
    // client): the holder knows once the call returned, and the lock is the process's again.
    let guard = holders
        .lock("forced:own")
        .lease(unrenewed)
        .acquire()
        .await
        .unwrap();
    let own = match &operator {
        Operator::One(_) => holders
            .force_release("forced:own")
            .await
            .expect("force_release"),
        Operator::EachNode(_) => operator.force("forced:own").await,
    };
    assert!(own, "there was a lock to release");
    if matches!(operator, Operator::One(_)) {
        assert!(
            !guard.is_held(),
            "the holder's own locker released its lock by force, and the holder trusts it"
        );
    }
    assert!(taken_at_once(&holders, Primitive::Lock, "forced:own").await);
    drop(guard);
}
