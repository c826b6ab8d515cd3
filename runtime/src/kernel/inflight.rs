//! A store call that was sent and may still land: owned, so that a caller who stops polling
//! it (a cancelled acquire) hands it to the locker's background task, which awaits its answer
//! before anything undoes it. An undo sent beside the call instead can reach the engine first
//! (over another pooled connection, one still opening, or a server that was paused), find
//! nothing to undo, and then the call lands and leaves the lock taken for its whole lease.
//!
//! Every primitive's acquire goes through [`InFlight`]; the tickets that give back what it may
//! have taken (a local turn, an abandoned share) wait for its [`Settled`] signal first.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::watch;

use crate::error::LockError;
use crate::kernel::background::Background;

/// A store call that owns what it borrows.
pub(crate) type Call<T> = Pin<Box<dyn Future<Output = Result<T, LockError>> + Send>>;

/// A sent call: polled in place while its caller waits; dropped unanswered, it goes on in the
/// background until it is answered (every store call is bounded by the operation timeout).
pub(crate) struct InFlight<T: Send + 'static> {
    /// Where the call goes on when its caller stops polling it.
    background: Arc<Background>,
    call: Option<Call<T>>,
    /// Dropped once the call is answered, here or in the background.
    done: Option<watch::Sender<()>>,
}

/// Resolves once an [`InFlight`] call was answered (or can never be: no runtime was left to
/// finish it). What gives back the call's effect waits for it.
#[derive(Clone)]
pub(crate) struct Settled(watch::Receiver<()>);

impl Settled {
    pub(crate) async fn wait(mut self) {
        // Nothing is ever sent: the sender's drop is the signal.
        while self.0.changed().await.is_ok() {}
    }
}

impl<T: Send + 'static> InFlight<T> {
    /// Sends `call` (on its first poll), and the signal its undoers wait for; dropped
    /// unanswered, the call goes on in `background`.
    pub(crate) fn new(background: &Arc<Background>, call: Call<T>) -> (Self, Settled) {
        let (done, rx) = watch::channel(());
        let in_flight = InFlight {
            background: background.clone(),
            call: Some(call),
            done: Some(done),
        };
        (in_flight, Settled(rx))
    }
}

impl<T: Send + 'static> Future for InFlight<T> {
    type Output = Result<T, LockError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(call) = this.call.as_mut() else {
            return Poll::Ready(Err(LockError::unavailable(
                "a lock call was polled after it finished",
                None,
            )));
        };
        let answer = std::task::ready!(call.as_mut().poll(cx));
        this.call = None;
        this.done = None;
        Poll::Ready(answer)
    }
}

impl<T: Send + 'static> Drop for InFlight<T> {
    fn drop(&mut self) {
        let Some(call) = self.call.take() else {
            return;
        };
        let done = self.done.take();
        // Without a background task (no runtime left) the call cannot go on: dropping it drops
        // `done` too, and the undoers run (or the lease runs out) as before.
        let _ = self.background.run(Box::pin(async move {
            let _ = call.await;
            drop(done);
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    fn background() -> Arc<Background> {
        crate::Locker::in_memory().inner.background.clone()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_dropped_call_goes_on_and_settles_after_its_answer() {
        let background = background();
        let landed = Arc::new(AtomicBool::new(false));
        let call: Call<()> = {
            let landed = landed.clone();
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                landed.store(true, Ordering::SeqCst);
                Ok(())
            })
        };
        let (mut in_flight, settled) = InFlight::new(&background, call);
        // One poll sends it; then the caller goes away.
        assert!(futures_poll_once(&mut in_flight).await.is_none());
        drop(in_flight);
        settled.wait().await;
        assert!(
            landed.load(Ordering::SeqCst),
            "settled before the dropped call was answered"
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_answered_call_is_settled_at_once() {
        let background = background();
        let (in_flight, settled) = InFlight::new(&background, Box::pin(async { Ok(7) }));
        assert_eq!(in_flight.await.unwrap(), 7);
        tokio::time::timeout(Duration::from_millis(1), settled.wait())
            .await
            .expect("settled");
    }

    async fn futures_poll_once<F: Future + Unpin>(fut: &mut F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            Poll::Ready(match Pin::new(&mut *fut).poll(cx) {
                Poll::Ready(v) => Some(v),
                Poll::Pending => None,
            })
        })
        .await
    }
}
