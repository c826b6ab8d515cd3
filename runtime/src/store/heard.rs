//! Which of a store's answers came from its server: a call that the store answers from what
//! it knows alone (the give-back of a token that holds nothing, renewals over a session that
//! ended) says so here, and the locker's health does not take it for the engine answering.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    /// Set while a call runs under [`heard`]: whether the store answered it alone.
    static ALONE: Cell<bool>;
}

/// The call in progress is answered without the server: nothing was sent, or nothing sent
/// was answered. Outside [`heard`] it does nothing.
// Redis and PostgreSQL send every call to their servers: only the recipe of ZooKeeper and
// etcd (and the scripted store of the tests) answers alone, every engine's refusal of what
// it lacks (`lacks`), and a handover that needs nothing of the engine (`kept`).
pub(crate) fn answered_alone() {
    let _ = ALONE.try_with(|alone| alone.set(true));
}

/// Runs `call`: its outcome, and whether the server took part in it (false when the store
/// said it answered alone).
pub(crate) async fn heard<F: Future>(call: F) -> (F::Output, bool) {
    ALONE
        .scope(Cell::new(false), async {
            let outcome = call.await;
            (outcome, !ALONE.with(Cell::get))
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_is_heard_unless_the_store_answered_alone() {
        assert_eq!(heard(async { 1 }).await, (1, true));
        assert_eq!(heard(async { answered_alone() }).await, ((), false));
        // Each call is judged on its own, a nested one too.
        let outer = heard(async {
            let inner = heard(async { answered_alone() }).await;
            inner.1
        });
        assert_eq!(outer.await, (false, true));
        answered_alone(); // outside any call: nothing to mark
    }
}
