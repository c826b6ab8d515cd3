//! The `unfenced` cells: an unfenced lock excludes as a lock does, and is never handed to
//! a fenced waiter of its process.

use super::*;

/// Unfenced: the lock (an `UnfencedGuard`) excludes as a lock does; inside its scope an
/// unfenced acquire re-enters and a fenced one is refused; a fenced waiter of the process is
/// never handed the unfenced lease (it goes to the store), an unfenced one is.
pub(crate) async fn unfenced(prim: Prim) {
    for &via in vias(prim) {
        let case = format!("{prim:?} via {via:?}");
        let w = world();
        let o = Opts {
            unfenced: true,
            ..Opts::default()
        };
        let held = take(&w.a, prim, &o, via).await.unwrap();
        assert!(matches!(held, Taken::Unfenced(_)), "{case}: {held:?}");
        assert!(
            !free_for(&w.b, prim).await,
            "{case}: another process got in"
        );
        let a = w.a.clone();
        let (fenced, again) = held
            .scope(async move {
                (
                    a.lock(KEY).try_acquire().await,
                    a.lock(KEY).unfenced().try_acquire().await,
                )
            })
            .await;
        assert_config(fenced, "inside an unfenced hold", &case);
        assert!(again.unwrap().unwrap().is_reentrant(), "{case}");
        // A fenced waiter, then an unfenced one.
        let fenced_waiter = {
            let a = w.a.clone();
            tokio::spawn(async move {
                let g = a.lock(KEY).wait(LONG).acquire().await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                g.release().await.unwrap();
            })
        };
        settle().await;
        let unfenced_waiter = {
            let a = w.a.clone();
            tokio::spawn(async move {
                let g = a.lock(KEY).unfenced().wait(LONG).acquire().await.unwrap();
                g.release().await.unwrap();
            })
        };
        settle().await;
        let before = w.store.acquires();
        held.release().await.unwrap();
        fenced_waiter.await.unwrap();
        unfenced_waiter.await.unwrap();
        assert_eq!(
            w.store.acquires() - before,
            1,
            "{case}: the fenced waiter takes a lease of its own, the unfenced one is handed it"
        );
    }
}
