//! Cancellation after a number of polls: [`for_polls`] drops a future after its N-th poll, as
//! a `select!`, a timeout or a client that hung up would, at every await point in turn.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// `fut`, dropped after its `polls`-th poll if it has not finished by then.
struct DropAfter<F> {
    fut: Option<Pin<Box<F>>>,
    polls_left: usize,
}

impl<F: Future> Future for DropAfter<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(fut) = self.fut.as_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            self.fut = None;
            return Poll::Ready(Some(out));
        }
        self.polls_left = self.polls_left.saturating_sub(1);
        if self.polls_left == 0 {
            self.fut = None; // the cancellation under test
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

/// Runs `fut` for at most `polls` polls (at least one): `Some(output)` if it finished, `None`
/// if it was dropped unfinished.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use leasehold_tests::polls::for_polls;
/// assert_eq!(for_polls(1, async { 7 }).await, Some(7));
/// assert_eq!(for_polls(1, std::future::pending::<u8>()).await, None);
/// # }
/// ```
pub async fn for_polls<F: Future>(polls: usize, fut: F) -> Option<F::Output> {
    DropAfter {
        fut: Some(Box::pin(fut)),
        polls_left: polls,
    }
    .await
}
