//! The `on_lost` and `watchdog_off` cells: what a body and a guard see when nobody renews
//! the lease or the store refuses the renewals.

use super::*;

/// `on_lost` (the attribute's): when the lease is lost while the body runs (the store
/// refuses the renewals), `cancel` drops the body at once with `Lost`, `continue` lets it
/// finish.
pub(crate) async fn on_lost(prim: Prim) {
    for on_lost in [OnLost::Cancel, OnLost::Continue] {
        let case = format!("{prim:?}, on_lost {on_lost:?}");
        let w = world();
        let o = Opts {
            on_lost,
            ..Opts::default()
        };
        let taken = take(&w.a, prim, &o, Via::Attribute).await.unwrap();
        // The body under the read of a downgrade is the read's, with the cell's `on_lost`.
        let kind = match prim {
            Prim::downgrade => LeaseKind::Read,
            _ => kind_of(prim, 1),
        };
        w.store.refuse_renewals(1000);
        let finished = Arc::new(Mutex::new(false));
        let ran = finished.clone();
        let out = taken
            .run(&o.spec(kind), async move {
                tokio::time::sleep(LONG).await;
                *ran.lock().unwrap() = true;
                7
            })
            .await;
        assert!(!taken.is_held(), "{case}: not lost");
        let finished = *finished.lock().unwrap();
        match on_lost {
            OnLost::Cancel => {
                assert!(
                    matches!(out, Err(LockError::Lost { .. })),
                    "{case}: {out:?}"
                );
                assert!(!finished, "{case}: the body ran on");
            }
            _ => {
                assert_eq!(out.unwrap(), 7, "{case}");
                assert!(finished, "{case}: the body was cancelled");
            }
        }
        let _ = taken.release().await;
    }
}

/// `watchdog(false)`: nobody renews the lease, so the guard is lost at its end and another
/// process gets in then (not before); its release says `Lost`.
pub(crate) async fn watchdog_off(prim: Prim) {
    for &via in vias(prim) {
        let case = format!("{prim:?} via {via:?}");
        let w = world();
        let o = Opts {
            lease: Some(LEASE),
            watchdog: Some(false),
            ..Opts::default()
        };
        let start = Instant::now();
        let taken = take(&w.a, prim, &o, via).await.unwrap();
        tokio::time::sleep_until(start + LEASE / 2).await;
        assert!(taken.is_held(), "{case}");
        assert!(!free_for(&w.b, prim).await, "{case}: free within the lease");
        tokio::time::timeout_at(start + LEASE, taken.lost())
            .await
            .unwrap_or_else(|_| panic!("{case}: the lease was renewed"));
        assert!(!taken.is_held(), "{case}");
        tokio::time::sleep_until(start + LEASE + TICK).await;
        assert!(free_for(&w.b, prim).await, "{case}: taken after the lease");
        let released = taken.release().await;
        assert!(
            matches!(released, Err(LockError::Lost { .. })),
            "{case}: {released:?}"
        );
    }
}
