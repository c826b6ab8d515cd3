//! Running futures side by side without a dependency for it: RedLock's fan-out to its nodes,
//! a cluster's renewals slot by slot; and calls meant to reach the store together
//! ([`join_together`]), which an engine that groups concurrent calls sends as one.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

tokio::task_local! {
    /// Set while the current task runs the calls of a [`join_together`].
    static TOGETHER: ();
}

/// [`join_all`] of calls meant to reach the store together (a guard of several keys giving
/// them all back): while they run, an engine that groups concurrent calls sends none of them
/// ahead of the others by itself ([`together`]), so that they share one call.
pub(crate) async fn join_together<F: Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    TOGETHER.scope((), join_all(futures)).await
}

/// Whether the current task runs the calls of a [`join_together`]: a call that finds nothing
/// else on its way then waits a turn for its siblings instead of going out alone.
pub(crate) fn together() -> bool {
    TOGETHER.try_with(|_| ()).is_ok()
}

/// Runs futures concurrently and collects their outputs in order.
pub(crate) fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> JoinAll<F> {
    let futures: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let outputs = futures.iter().map(|_| None).collect();
    JoinAll { futures, outputs }
}

pub(crate) struct JoinAll<F: Future> {
    futures: Vec<Option<Pin<Box<F>>>>,
    outputs: Vec<Option<F::Output>>,
}

impl<F: Future> Unpin for JoinAll<F> {}

impl<F: Future> Future for JoinAll<F> {
    type Output = Vec<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut pending = false;
        for (slot, out) in this.futures.iter_mut().zip(this.outputs.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *out = Some(v);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            return Poll::Pending;
        }
        Poll::Ready(
            this.outputs
                .iter_mut()
                .map(|o| o.take().expect("every future finished"))
                .collect(),
        )
    }
}
