//! One leader election, measured: [`CANDIDATES`] candidates campaign, each on a session
//! (connection, locker) of its own, and an observer follows; over and over, the leader steps
//! down (resigns, or its session ends) and we time how long until the next candidate leads
//! and until the observer sees it. Written once, over [`Election`], for ours and every
//! baseline.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

/// Candidates of one election: the leader and two waiting.
pub(crate) const CANDIDATES: usize = 3;

/// The pause before each step-down: the previous leader campaigns again and the observer
/// settles, so that every handover starts from the same state (one leader, two queued, every
/// watch in place). Longer than etcd's watch resync period (100 ms): a watch etcd opens on a
/// revision already past is served by a loop that runs that often, so leaderships shorter
/// than it would time that loop rather than the handover.
const SETTLE: Duration = Duration::from_millis(120);

/// The longest a handover, or a replacement candidate's connection, may take before the run
/// gives up on its side and row (bounded: a side that never hands over must not hang the run).
const BOUND: Duration = Duration::from_secs(5);

/// An election, ours or a baseline, named once per window (a fresh name every window, so
/// nothing one window leaves behind can touch the next).
pub(crate) trait Election: Send + Sync + 'static {
    /// A candidate's session: a locker, a client session, a connection.
    type Candidate: Send + Sync + 'static;
    /// What a campaign hands to the step-down.
    type Leadership: Send + 'static;
    /// What the observer follows the leadership with.
    type Observer: Send + 'static;

    /// Connects one candidate.
    fn candidate(&self) -> impl Future<Output = Self::Candidate> + Send;

    /// Waits until `candidate` leads; its leadership and term (increasing from leader to
    /// leader, the same number the observer reports).
    fn campaign<'a>(
        &'a self,
        candidate: &'a Self::Candidate,
        identity: &'a str,
    ) -> impl Future<Output = (Self::Leadership, u64)> + Send + 'a;

    /// Steps down by the election's own call.
    fn resign<'a>(
        &'a self,
        candidate: &'a Self::Candidate,
        leadership: Self::Leadership,
    ) -> impl Future<Output = ()> + Send + 'a;

    /// Steps down by ending the candidate's session: drop everything, no resign call (what
    /// happens to a leader whose process closes its client).
    fn end_session(
        &self,
        candidate: Self::Candidate,
        leadership: Self::Leadership,
    ) -> impl Future<Output = ()> + Send + '_;

    /// Connects an observer.
    fn observer(&self) -> impl Future<Output = Self::Observer> + Send;

    /// Waits until the observer sees a leader whose term is not `last`; its term.
    fn next_leader<'a>(
        &'a self,
        observer: &'a mut Self::Observer,
        last: u64,
    ) -> impl Future<Output = u64> + Send + 'a;
}

/// How the leader steps down.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum StepDown {
    Resign,
    EndSession,
}

/// Handover times of one side and row, in µs, from the step-down order.
#[derive(Default)]
pub(crate) struct Samples {
    /// Until the next candidate's campaign returned.
    pub(crate) elected_us: Vec<f64>,
    /// Until the observer reported the next leader.
    pub(crate) observed_us: Vec<f64>,
    /// A handover that did not happen within [`BOUND`]: the side's row stops there.
    pub(crate) gave_up: Option<String>,
}

/// A candidate that leads: its term, when its campaign returned, when it is ready to step
/// down (its replacement connected, for [`StepDown::EndSession`]) and the order to.
struct Elected {
    term: u64,
    at: Instant,
    ready: oneshot::Receiver<()>,
    step_down: oneshot::Sender<()>,
}

/// Runs `count` handovers of `side` (unless one gives up), adding their times to `samples`.
pub(crate) async fn handovers<E: Election>(
    side: Arc<E>,
    how: StepDown,
    count: usize,
    samples: &mut Samples,
) {
    if samples.gave_up.is_some() {
        return;
    }
    let mut tasks = JoinSet::new();
    let (elected_tx, mut elected) = mpsc::unbounded_channel();
    for id in 0..CANDIDATES {
        tasks.spawn(candidate(side.clone(), id, how, elected_tx.clone()));
    }
    let (seen_tx, mut seen) = mpsc::unbounded_channel();
    tasks.spawn(observe(side.clone(), seen_tx));
    let result = measure(&mut elected, &mut seen, count, samples).await;
    if let Err(why) = result {
        samples.gave_up = Some(why);
    }
    // Waiting candidates and the observer go with their tasks (a campaign dropped midway is
    // each side's own cancellation; the next window's election has another name).
    drop(elected);
    tasks.shutdown().await;
}

async fn measure(
    elected: &mut mpsc::UnboundedReceiver<Elected>,
    seen: &mut mpsc::UnboundedReceiver<(u64, Instant)>,
    count: usize,
    samples: &mut Samples,
) -> Result<(), String> {
    let mut leader = within(elected.recv(), "the first leader")
        .await?
        .ok_or("the candidates stopped")?;
    seen_after(seen, leader.term, "the observer's first leader").await?;
    for _ in 0..count {
        within(&mut leader.ready, "a replacement candidate")
            .await?
            .map_err(|_| "a candidate stopped")?;
        tokio::time::sleep(SETTLE).await;
        while seen.try_recv().is_ok() {}
        let order = Instant::now();
        let _ = leader.step_down.send(());
        let next = within(elected.recv(), "a handover")
            .await?
            .ok_or("the candidates stopped")?;
        let observed = seen_after(seen, next.term, "the observer seeing a handover").await?;
        let us = |at: Instant| at.saturating_duration_since(order).as_secs_f64() * 1e6;
        samples.elected_us.push(us(next.at));
        samples.observed_us.push(us(observed));
        leader = next;
    }
    Ok(())
}

/// `what` within [`BOUND`], or why not.
async fn within<T>(what: impl Future<Output = T>, name: &str) -> Result<T, String> {
    tokio::time::timeout(BOUND, what)
        .await
        .map_err(|_| format!("{name} took longer than {BOUND:?}"))
}

/// When the observer reported a term of at least `term`.
async fn seen_after(
    seen: &mut mpsc::UnboundedReceiver<(u64, Instant)>,
    term: u64,
    name: &str,
) -> Result<Instant, String> {
    within(
        async {
            while let Some((seen_term, at)) = seen.recv().await {
                if seen_term >= term {
                    return Ok(at);
                }
            }
            Err("the observer stopped".to_owned())
        },
        name,
    )
    .await?
}

/// One candidate: campaigns, reports its election, steps down when told, and campaigns
/// again (on a new session after ending its own).
async fn candidate<E: Election>(
    side: Arc<E>,
    id: usize,
    how: StepDown,
    elected: mpsc::UnboundedSender<Elected>,
) {
    let identity = format!("candidate-{id}");
    let mut session = side.candidate().await;
    loop {
        let (leadership, term) = side.campaign(&session, &identity).await;
        let at = Instant::now();
        let (ready_tx, ready) = oneshot::channel();
        let (step_down, order) = oneshot::channel();
        let report = Elected {
            term,
            at,
            ready,
            step_down,
        };
        if elected.send(report).is_err() {
            return side.resign(&session, leadership).await;
        }
        // The replacement connects before the order, so that its connecting (a process fork
        // for PostgreSQL, a session for ZooKeeper) is not timed.
        let replacement = match how {
            StepDown::Resign => None,
            StepDown::EndSession => Some(side.candidate().await),
        };
        let _ = ready_tx.send(());
        if order.await.is_err() {
            return side.resign(&session, leadership).await;
        }
        match replacement {
            None => side.resign(&session, leadership).await,
            Some(replacement) => {
                let ended = std::mem::replace(&mut session, replacement);
                side.end_session(ended, leadership).await;
            }
        }
    }
}

/// The observer: reports each leader it sees, with when.
async fn observe<E: Election>(side: Arc<E>, seen: mpsc::UnboundedSender<(u64, Instant)>) {
    let mut observer = side.observer().await;
    let mut last = 0;
    loop {
        last = side.next_leader(&mut observer, last).await;
        if seen.send((last, Instant::now())).is_err() {
            return;
        }
    }
}
