//! Group commit: up to [`MAX_IN_FLIGHT`] calls of one kind (Redis's acquire scripts, or its
//! release scripts; the deletes of the contenders that ZooKeeper's and etcd's releases give
//! back) are on their way to the server at a time; requests that arrive while all of them are
//! out wait and go together in the next call. A request goes out at once while there is room,
//! so nothing waits for a batch to fill; under load, one call carries many requests, which
//! saves the server the per-call cost (running a script, committing a transaction) and the
//! client the per-request cost of the connection, while several calls still overlap.
//!
//! A request that finds nothing on its way goes out alone, at once, and its caller gets the
//! answer straight from the call, unless it is one of several sent together
//! ([`crate::store::join_together`]: a guard of several keys giving them back): it then leads
//! a batch, so that its siblings, which arrive in the same turn, go in the same call.
//! Otherwise the task whose request starts a batch sends it; when more requests queued up
//! meanwhile, a spawned task sends those. A request whose caller went away while its batch
//! was in flight is answered anyway, and what it took is given back ([`Item::abandoned`]).

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::error::LockError;

/// The most requests in one call, unless the kind says fewer ([`Item::MAX_BATCH`]).
const MAX_BATCH: usize = 128;

/// The most calls of one kind on their way to the server at a time.
const MAX_IN_FLIGHT: usize = 16;

type Reply<T, C> = oneshot::Sender<Result<<T as Item<C>>::Out, LockError>>;

/// One kind of request that can be batched, sent through a context `C`.
pub(crate) trait Item<C>: Sized + Send + 'static
where
    C: Send + Sync + 'static,
{
    /// The answer to one request.
    type Out: Send + 'static;

    /// The most requests one call carries (what the server takes in one call).
    const MAX_BATCH: usize = MAX_BATCH;

    /// The queue of this kind of request in `ctx`.
    fn queue(ctx: &C) -> &Queue<Self, C>;

    /// Sends a batch; one answer per item, in order.
    fn send(
        ctx: &Arc<C>,
        items: &[Self],
    ) -> impl Future<Output = Result<Vec<Self::Out>, LockError>> + Send;

    /// The caller of `item` left before `out` arrived: undo what needs undoing.
    fn abandoned(ctx: &Arc<C>, item: Self, out: Self::Out);
}

/// Requests of one kind waiting for the next batch.
pub(crate) struct Queue<T: Item<C>, C: Send + Sync + 'static> {
    state: Mutex<State<T, C>>,
}

struct State<T: Item<C>, C: Send + Sync + 'static> {
    /// Batches on their way (or being assembled); at [`MAX_IN_FLIGHT`], new requests wait.
    sending: usize,
    waiting: Vec<(T, Reply<T, C>)>,
}

impl<T: Item<C>, C: Send + Sync + 'static> Default for Queue<T, C> {
    fn default() -> Self {
        Queue {
            state: Mutex::new(State {
                sending: 0,
                waiting: Vec::new(),
            }),
        }
    }
}

/// Sends `item` in the next batch and waits for its answer until `deadline`: a request that
/// waited for a free slot is bounded like one sent at once. An answer that comes later is
/// taken care of by [`Item::abandoned`]; `late` makes the error of a request that timed out.
pub(crate) async fn submit<T, C>(
    ctx: &Arc<C>,
    item: T,
    deadline: tokio::time::Instant,
    late: impl FnOnce() -> LockError,
) -> Result<T::Out, LockError>
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    // Nothing on its way (so nobody waits either: requests only wait while all slots are
    // out): a lone request goes out at once, by itself, without a batch's hand-offs. One of
    // several sent together leads a batch instead, which its siblings join.
    let together = crate::store::together();
    let lone = {
        let mut state = T::queue(ctx).state.lock().unwrap();
        let lone = state.sending == 0 && !together;
        if lone {
            debug_assert!(state.waiting.is_empty());
            state.sending = 1;
        }
        lone
    };
    if lone {
        let _slot = Slot::<T, C>::new(ctx);
        let answer = T::send(ctx, std::slice::from_ref(&item)).await;
        return answer.map(|mut outs| outs.pop().expect("one answer per request"));
    }
    let (tx, rx) = oneshot::channel();
    let lead = {
        let mut state = T::queue(ctx).state.lock().unwrap();
        state.waiting.push((item, tx));
        let lead = state.sending < MAX_IN_FLIGHT;
        if lead {
            state.sending += 1;
        }
        lead
    };
    if lead {
        let _slot = Slot::<T, C>::new(ctx);
        if together {
            // The siblings are polled in this task's same turn: one turn is enough, without
            // yielding to the other tasks and the I/O driver first.
            siblings_turn().await;
        } else {
            // Under load, let the other tasks that are ready to run now (typically woken by
            // the same reply) add their requests first: they all go in this one call.
            tokio::task::yield_now().await;
        }
        send_one_batch::<T, C>(ctx).await;
        // The slot goes back here, before waiting for the answer: it may be in a later batch.
    }
    match tokio::time::timeout_at(deadline, rx).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => Err(LockError::unavailable(
            "the request was dropped before the server answered it (the task sending its \
             batch was cancelled); try again",
            None,
        )),
        Err(_) => Err(late()),
    }
}

/// Pending once, its task woken at once: the other futures of a
/// [`join_together`](crate::store::join_together) are polled meanwhile, in the same turn.
async fn siblings_turn() {
    let mut waited = false;
    std::future::poll_fn(|cx| {
        if waited {
            return std::task::Poll::Ready(());
        }
        waited = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await;
}

/// Takes up to [`Item::MAX_BATCH`] waiting requests, sends them and answers each.
async fn send_one_batch<T, C>(ctx: &Arc<C>)
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    let batch: Vec<(T, Reply<T, C>)> = {
        let mut state = T::queue(ctx).state.lock().unwrap();
        let n = state.waiting.len().min(T::MAX_BATCH);
        state.waiting.drain(..n).collect()
    };
    if batch.is_empty() {
        return;
    }
    let (items, replies): (Vec<T>, Vec<Reply<T, C>>) = batch.into_iter().unzip();
    match T::send(ctx, &items).await {
        Ok(outs) => {
            for ((item, reply), out) in items.into_iter().zip(replies).zip(outs) {
                if let Err(Ok(out)) = reply.send(Ok(out)) {
                    T::abandoned(ctx, item, out);
                }
            }
        }
        Err(e) => {
            for (reply, err) in replies.into_iter().zip(for_each(e)) {
                let _ = reply.send(Err(err));
            }
        }
    }
}

/// The error of a call that failed, for each request it carried: the first gets `e` itself,
/// the others an `Unavailable` with its message (a call's outcome is the same unknown for all).
pub(crate) fn for_each(e: LockError) -> impl Iterator<Item = LockError> {
    let message = e.to_string();
    std::iter::once(e).chain(std::iter::repeat_with(move || {
        LockError::unavailable(message.clone(), None)
    }))
}

/// After a batch: if more requests queued up meanwhile, a spawned task sends them (so this
/// caller can return); else this sender's slot is free again.
fn hand_on<T, C>(ctx: &Arc<C>)
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    {
        let mut state = T::queue(ctx).state.lock().unwrap();
        if state.waiting.is_empty() {
            state.sending -= 1;
            return;
        }
    }
    let ctx = ctx.clone();
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                send_one_batch::<T, C>(&ctx).await;
                hand_on::<T, C>(&ctx);
            });
        }
        Err(_) => {
            // No runtime to send them from: fail them rather than leave them hanging.
            let mut state = T::queue(&ctx).state.lock().unwrap();
            state.sending -= 1;
            for (_, reply) in state.waiting.drain(..) {
                let _ = reply.send(Err(LockError::unavailable(
                    "no Tokio runtime to send the request from",
                    None,
                )));
            }
        }
    }
}

/// One of the [`MAX_IN_FLIGHT`] slots, held by a caller while it sends. Dropped, whether the
/// call finished or the caller was cancelled mid-call, it hands the queue on ([`hand_on`]): the
/// requests that queued meanwhile go out, so the queue never stalls.
struct Slot<'a, T, C>
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    ctx: &'a Arc<C>,
    _kind: std::marker::PhantomData<fn() -> T>,
}

impl<'a, T, C> Slot<'a, T, C>
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    fn new(ctx: &'a Arc<C>) -> Self {
        Slot {
            ctx,
            _kind: std::marker::PhantomData,
        }
    }
}

impl<T, C> Drop for Slot<'_, T, C>
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    fn drop(&mut self) {
        hand_on::<T, C>(self.ctx);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A context whose "server" doubles each number after 10 ms, and records the size of
    /// every call.
    #[derive(Default)]
    struct Doubler {
        queue: Queue<Req, Doubler>,
        calls: Mutex<Vec<usize>>,
        abandoned: AtomicUsize,
    }

    struct Req(u32);

    impl Item<Doubler> for Req {
        type Out = u32;

        fn queue(ctx: &Doubler) -> &Queue<Self, Doubler> {
            &ctx.queue
        }

        async fn send(ctx: &Arc<Doubler>, items: &[Self]) -> Result<Vec<u32>, LockError> {
            ctx.calls.lock().unwrap().push(items.len());
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(items.iter().map(|r| r.0 * 2).collect())
        }

        fn abandoned(ctx: &Arc<Doubler>, _: Self, _: u32) {
            ctx.abandoned.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn submit_one(ctx: &Arc<Doubler>, n: u32) -> tokio::task::JoinHandle<Result<u32, LockError>> {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
            submit(&ctx, Req(n), deadline, || {
                LockError::unavailable("late", None)
            })
            .await
        })
    }

    fn sending(ctx: &Doubler) -> usize {
        ctx.queue.state.lock().unwrap().sending
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_request_goes_out_alone_and_frees_its_slot() {
        let ctx = Arc::new(Doubler::default());
        assert_eq!(submit_one(&ctx, 21).await.unwrap().unwrap(), 42);
        assert_eq!(submit_one(&ctx, 4).await.unwrap().unwrap(), 8);
        assert_eq!(*ctx.calls.lock().unwrap(), [1, 1]);
        assert_eq!(sending(&ctx), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_that_arrive_while_one_is_out_share_the_next_call() {
        let ctx = Arc::new(Doubler::default());
        let first = submit_one(&ctx, 1);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(sending(&ctx), 1, "the first request is on its way");
        let rest: Vec<_> = (2..=6).map(|n| submit_one(&ctx, n)).collect();
        assert_eq!(first.await.unwrap().unwrap(), 2);
        for (n, h) in (2..=6).zip(rest) {
            assert_eq!(h.await.unwrap().unwrap(), n * 2);
        }
        assert_eq!(*ctx.calls.lock().unwrap(), [1, 5]);
        assert_eq!(sending(&ctx), 0);
        assert_eq!(ctx.abandoned.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_sent_together_share_one_call_though_nothing_was_on_its_way() {
        let ctx = Arc::new(Doubler::default());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        let late = || LockError::unavailable("late", None);
        let answers =
            crate::store::join_together((1..=4).map(|n| submit(&ctx, Req(n), deadline, late)))
                .await;
        let answers: Vec<u32> = answers.into_iter().map(Result::unwrap).collect();
        assert_eq!(answers, [2, 4, 6, 8]);
        assert_eq!(*ctx.calls.lock().unwrap(), [4], "one call for the four");
        assert_eq!(sending(&ctx), 0);
        // Joined without the hint, the first goes out alone and the others follow it.
        let answers = crate::store::join_all((5..=7).map(|n| submit(&ctx, Req(n), deadline, late)));
        assert_eq!(answers.await.len(), 3);
        assert_eq!(*ctx.calls.lock().unwrap(), [4, 1, 2]);
        assert_eq!(sending(&ctx), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_sender_cancelled_in_flight_frees_its_slot() {
        let ctx = Arc::new(Doubler::default());
        let lone = submit_one(&ctx, 1);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(sending(&ctx), 1);
        lone.abort();
        assert!(lone.await.unwrap_err().is_cancelled());
        assert_eq!(sending(&ctx), 0, "the cancelled sender gave its slot back");
        assert_eq!(submit_one(&ctx, 5).await.unwrap().unwrap(), 10);
        assert_eq!(*ctx.calls.lock().unwrap(), [1, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn senders_cancelled_in_flight_free_their_slots() {
        // One request out alone; three more arrive meanwhile and go out together. Cancelling
        // them mid-call gives their slots back at once, and the queue keeps going.
        let ctx = Arc::new(Doubler::default());
        let lone = submit_one(&ctx, 1);
        tokio::time::sleep(Duration::from_millis(1)).await;
        let batch: Vec<_> = (2..=4).map(|n| submit_one(&ctx, n)).collect();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(*ctx.calls.lock().unwrap(), [1, 3]);
        assert_eq!(sending(&ctx), 2);
        for h in &batch {
            h.abort();
        }
        for h in batch {
            assert!(h.await.unwrap_err().is_cancelled());
        }
        assert_eq!(sending(&ctx), 1, "only the lone request is still out");
        assert_eq!(lone.await.unwrap().unwrap(), 2);
        assert_eq!(sending(&ctx), 0);
        assert_eq!(submit_one(&ctx, 5).await.unwrap().unwrap(), 10);
    }
}
