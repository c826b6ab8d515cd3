//! The `hold_at_least` and `hold_at_most` cells: how long what was taken stays taken
//! after an early release, and where a body running too long is cut off.

use super::*;

/// `hold_at_least`: released (or dropped) early, what was taken stays taken until the hold
/// ends, for every other process, then comes free; where locks expire (an expiry set at the
/// release) and where they live with the session (released by the locker at the end).
pub(crate) async fn hold_at_least(prim: Prim) {
    for &via in vias(prim) {
        for session_locks in [false, true] {
            let case = format!("{prim:?} via {via:?}, session locks {session_locks}");
            let w = world_where(session_locks);
            let start = Instant::now();
            let o = Opts {
                hold_at_least: Some(HOLD),
                ..Opts::default()
            };
            let taken = take(&w.a, prim, &o, via).await.unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
            taken.release().await.unwrap();
            settle().await;
            assert!(
                !free_for(&w.b, prim).await,
                "{case}: free after the release"
            );
            if prim == Prim::read {
                let reader = w.b.read_lock(KEY).try_acquire().await.unwrap();
                assert!(reader.is_some(), "{case}: a held read keeps readers out");
            }
            tokio::time::sleep_until(start + HOLD - TICK).await;
            assert!(!free_for(&w.b, prim).await, "{case}: free within the hold");
            tokio::time::sleep_until(start + HOLD + TICK).await;
            assert!(free_for(&w.b, prim).await, "{case}: taken after the hold");
        }
    }
}

/// `hold_at_most` (the attribute's lease that nobody renews): a body running past it is
/// cancelled with `Lost` at the bound, and the lock is taken until then and free after.
pub(crate) async fn hold_at_most(prim: Prim) {
    let w = world();
    let o = Opts {
        lease: Some(BOUND),
        watchdog: Some(false),
        ..Opts::default()
    };
    let start = Instant::now();
    let taken = take(&w.a, prim, &o, Via::Attribute).await.unwrap();
    // The body under the read of a downgrade is the read's (a plain one inside the write).
    let spec = match prim {
        Prim::downgrade => Opts::default().spec(LeaseKind::Read),
        _ => o.spec(kind_of(prim, 1)),
    };
    let finished = Arc::new(Mutex::new(false));
    let ran = finished.clone();
    let body = taken.run(&spec, async move {
        tokio::time::sleep(BOUND * 2).await;
        *ran.lock().unwrap() = true;
    });
    let other = async {
        tokio::time::sleep_until(start + BOUND - TICK * 20).await;
        assert!(
            !free_for(&w.b, prim).await,
            "{prim:?}: free before the bound"
        );
    };
    let (out, ()) = tokio::join!(body, other);
    assert!(
        matches!(out, Err(LockError::Lost { .. })),
        "{prim:?}: {out:?}"
    );
    assert!(
        !*finished.lock().unwrap(),
        "{prim:?}: the body ran past the bound"
    );
    assert!(
        start.elapsed() <= BOUND,
        "{prim:?}: cancelled at {:?}",
        start.elapsed()
    );
    assert!(taken.release().await.unwrap_err().is_lost());
    tokio::time::sleep_until(start + BOUND + TICK).await;
    assert!(
        free_for(&w.b, prim).await,
        "{prim:?}: taken after the bound"
    );
}
