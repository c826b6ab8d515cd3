//! The `wait_zero` cells: what another process holds is `Busy` at once and leaves nothing
//! behind.

use super::*;

/// `wait = 0`: what another process holds is `Busy` at once (no time passes) and leaves
/// nothing behind; a downgrade, whose read needs nobody else, is granted at once.
pub(crate) async fn wait_zero(prim: Prim) {
    for &via in vias(prim) {
        let case = format!("{prim:?} via {via:?}");
        let w = world();
        let now = Opts::default().waiting(Duration::ZERO);
        if prim == Prim::downgrade {
            let write = take_one(&w.a, Prim::write, &now, via).await.unwrap();
            let a = w.a.clone();
            let start = Instant::now();
            let read = write
                .scope(async move { take_one(&a, Prim::read, &now, via).await })
                .await
                .unwrap();
            assert_eq!(start.elapsed(), Duration::ZERO, "{case}");
            write.release().await.unwrap();
            assert!(read.is_held(), "{case}");
            assert!(!free_for(&w.b, prim).await, "{case}");
            read.release().await.unwrap();
            assert!(free_for(&w.b, prim).await, "{case}");
            continue;
        }
        let (other, blocked_by) = blocker(&w.b, prim, via).await;
        let start = Instant::now();
        let busy = take(&w.a, prim, &now, via).await;
        assert!(
            matches!(busy, Err(LockError::Busy { .. })),
            "{case}, held by {blocked_by}: {busy:?}"
        );
        assert_eq!(start.elapsed(), Duration::ZERO, "{case}: waited");
        if prim == Prim::lock_all {
            // The key it could take was given back.
            let first = w.b.lock(KEYS[0]).try_acquire().await.unwrap();
            first
                .expect("a key was left taken")
                .release()
                .await
                .unwrap();
        }
        other.release().await.unwrap();
        settle().await;
        let start = Instant::now();
        let taken = take(&w.a, prim, &now, via).await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO, "{case}");
        taken.release().await.unwrap();
    }
}
