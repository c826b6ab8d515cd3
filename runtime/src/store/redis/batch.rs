//! Group commit for the lock scripts: up to [`MAX_IN_FLIGHT`] script calls of one kind
//! (acquires, or releases) are on their way to Redis at a time; requests that arrive while
//! all of them are out wait and go together in the next call. A request goes out at once
//! while there is room, so nothing waits for a batch to fill; under load, one script call
//! carries many requests, which saves Redis the per-call cost of running a script and the
//! client the per-request cost of the connection, while several calls still overlap.
//!
//! The task whose request starts a batch sends it; when more requests queued up meanwhile, a
//! spawned task sends those. A request whose caller went away while its batch was in flight
//! is answered anyway, and a lock it took is given back ([`Item::abandoned`]).

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::error::LockError;

/// The most requests in one script call.
const MAX_BATCH: usize = 128;

/// The most script calls of one kind on their way to Redis at a time.
const MAX_IN_FLIGHT: usize = 16;

type Reply<T, C> = oneshot::Sender<Result<<T as Item<C>>::Out, LockError>>;

/// One kind of request that can be batched, sent through a context `C`.
pub(crate) trait Item<C>: Sized + Send + 'static
where
    C: Send + Sync + 'static,
{
    /// The answer to one request.
    type Out: Send + 'static;

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
    let (tx, rx) = oneshot::channel();
    let (lead, busy) = {
        let mut state = T::queue(ctx).state.lock().unwrap();
        state.waiting.push((item, tx));
        let busy = state.sending > 0;
        let room = state.sending < MAX_IN_FLIGHT;
        if room {
            state.sending += 1;
        }
        (room, busy)
    };
    if lead {
        let mut sender = Sender::<T, C> {
            ctx: ctx.clone(),
            done: false,
            _kind: std::marker::PhantomData,
        };
        if busy {
            // Under load, let the other tasks that are ready to run now (typically woken by
            // the same reply) add their requests first: they all go in this one call. A lone
            // request goes out at once.
            tokio::task::yield_now().await;
        }
        send_one_batch::<T, C>(ctx).await;
        sender.done = true;
        hand_on::<T, C>(ctx);
    }
    match tokio::time::timeout_at(deadline, rx).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(_)) => Err(LockError::unavailable(
            "the request was dropped before Redis answered it (the task sending its batch \
             was cancelled); try again",
            None,
        )),
        Err(_) => Err(late()),
    }
}

/// Takes up to [`MAX_BATCH`] waiting requests, sends them and answers each.
async fn send_one_batch<T, C>(ctx: &Arc<C>)
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    let batch: Vec<(T, Reply<T, C>)> = {
        let mut state = T::queue(ctx).state.lock().unwrap();
        let n = state.waiting.len().min(MAX_BATCH);
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
            let message = e.to_string();
            let mut first = Some(e);
            for reply in replies {
                let err = first
                    .take()
                    .unwrap_or_else(|| LockError::unavailable(message.clone(), None));
                let _ = reply.send(Err(err));
            }
        }
    }
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

/// The role of sending batches, held by a caller while it sends one. Dropped before it is
/// done (the caller was cancelled), it hands the role on, so the queue never stalls.
struct Sender<T, C>
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    ctx: Arc<C>,
    done: bool,
    _kind: std::marker::PhantomData<fn() -> T>,
}

impl<T, C> Drop for Sender<T, C>
where
    T: Item<C>,
    C: Send + Sync + 'static,
{
    fn drop(&mut self) {
        if !self.done {
            hand_on::<T, C>(&self.ctx);
        }
    }
}
