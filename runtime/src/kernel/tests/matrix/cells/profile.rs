//! The `profile` cells: a named profile's values replace the call's, and a profile that does
//! not fit the primitive is refused.

use super::fair::served_in_order;
use super::*;

/// A profile: unknown, refused; a `limit` is a semaphore's (refused elsewhere); `quick`'s
/// wait, lease and watchdog replace the call's; `fair`'s fairness is the lock's (left out by
/// reads and semaphores, which have none).
pub(crate) async fn profile(prim: Prim) {
    for &via in vias(prim) {
        let case = format!("{prim:?} via {via:?}");
        let w = world();
        let named = |name| Opts {
            profile: Some(name),
            ..Opts::default()
        };
        assert_config(
            take(&w.a, prim, &named("nope"), via).await,
            "nope",
            &format!("{case}, an unknown profile"),
        );
        if prim == Prim::permits {
            let o = named("limit");
            let one = take(&w.a, prim, &o, via).await.unwrap();
            let two = take(&w.b, prim, &o, via).await.unwrap();
            let Taken::Permit(permit) = &one else {
                unreachable!()
            };
            assert_eq!(permit.limit(), 2, "{case}: the profile's limit");
            assert!(w.b.semaphore(KEY, 2).try_acquire().await.unwrap().is_none());
            drop((one, two));
            settle().await;
        } else {
            assert_config(
                take(&w.a, prim, &named("limit"), via).await,
                "limit",
                &format!("{case}, a profile with a limit"),
            );
            if prim == Prim::downgrade {
                // The read of a downgrade resolves its own profile too.
                let write = take_one(&w.a, Prim::write, &Opts::default(), via)
                    .await
                    .unwrap();
                let a = w.a.clone();
                let (unknown, limit, fair) = write
                    .scope(async move {
                        (
                            take_one(&a, Prim::read, &named("nope"), via).await,
                            take_one(&a, Prim::read, &named("limit"), via).await,
                            take_one(&a, Prim::read, &named("fair"), via).await,
                        )
                    })
                    .await;
                assert_config(unknown, "nope", &case);
                assert_config(limit, "limit", &case);
                assert!(fair.is_ok(), "{case}: a read leaves a profile's fair out");
                write.release().await.unwrap();
                settle().await;
            }
        }
        // `quick`: no wait while another process holds it, and an unrenewed short lease.
        let (other, blocked_by) = blocker(&w.b, prim, via).await;
        let start = Instant::now();
        let busy = take(&w.a, prim, &named("quick"), via).await;
        assert!(
            matches!(busy, Err(LockError::Busy { .. })),
            "{case}, held by {blocked_by}: {busy:?}"
        );
        assert_eq!(start.elapsed(), Duration::ZERO, "{case}: waited");
        other.release().await.unwrap();
        settle().await;
        let start = Instant::now();
        let taken = take(&w.a, prim, &named("quick"), via).await.unwrap();
        tokio::time::timeout(LEASE, taken.lost())
            .await
            .unwrap_or_else(|_| panic!("{case}: the profile's lease was renewed"));
        assert!(start.elapsed() < LEASE);
        tokio::time::sleep_until(start + LEASE + TICK).await;
        assert!(free_for(&w.b, prim).await, "{case}: taken after the lease");
        // `fair`: the lock's fairness (for the attribute too, whose own `fair` is false);
        // read locks and semaphores leave it out.
        match prim {
            Prim::lock | Prim::write | Prim::lock_all | Prim::downgrade | Prim::leader => {
                served_in_order(prim, via, &named("fair"), true).await
            }
            Prim::read | Prim::permits => {
                let taken = take(&w.a, prim, &named("fair"), via).await;
                assert!(taken.is_ok(), "{case}: {taken:?}");
            }
        }
    }
}
