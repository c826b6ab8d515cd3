//! ZooKeeper and etcd: a waiter's turn (its znode, its key) across the attempts of one wait,
//! when an attempt's outcome was unknown, and when its wait is no longer polled (issue 45).
//! Each test judges by what the store saw: another process granted while the first still says
//! it holds, the first's contender missing from the queue at the server while it holds, or a
//! waiter that is not polled still in the queue when another wait ends. The faults are timed
//! against what the server saw (a create seen there), with a margin of one proxy delay either
//! side; a fault that misses its window weakens a trial, it cannot fail it.

use std::future::Future;
use std::time::Duration;

use leasehold::{Leadership, LockError, LockGuard, Locker};
use leasehold_tests::harness::{EtcdServer, ProxyMode, TcpProxy, ZkServer};
use tokio::time::{sleep, Instant};
use zookeeper_client as zk;

/// The lease of every holder here: renewed every lease/3, which is when a holder whose
/// contender was deleted under it would be told.
const LEASE: Duration = Duration::from_secs(6);

/// How long another process keeps trying while the first holds: past one renewal of the
/// first's lease, so that a loss the store saw would have been told by then.
const WATCH: Duration = Duration::from_secs(3);

/// The connect timeout of every locker here.
const CONNECT: Duration = Duration::from_secs(2);

async fn zk_locker(hosts: &str, op_timeout: Duration) -> Locker {
    Locker::builder()
        .zookeeper(hosts)
        .session_timeout(LEASE)
        .default_lease(LEASE)
        .op_timeout(op_timeout)
        .connect_timeout(CONNECT)
        .default_wait(Duration::from_secs(20))
        .build()
        .await
        .expect("locker on zookeeper")
}

async fn etcd_locker(endpoint: &str, op_timeout: Duration) -> Locker {
    Locker::builder()
        .etcd([endpoint.to_owned()])
        .session_timeout(LEASE)
        .default_lease(LEASE)
        .op_timeout(op_timeout)
        .connect_timeout(CONNECT)
        .default_wait(Duration::from_secs(20))
        .build()
        .await
        .expect("locker on etcd")
}

/// The container of a ZooKeeper semaphore or lock named `key`.
fn zk_container(kind: &str, key: &str) -> String {
    format!("/leasehold/leasehold:{kind}:{{{key}}}")
}

/// The contenders of a ZooKeeper container, in queue order (by sequence number).
async fn zk_queue(client: &zk::Client, container: &str) -> Vec<String> {
    let mut children = match client.list_children(container).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => Vec::new(),
        Err(e) => panic!("listing {container}: {e}"),
    };
    children.sort_by_key(|c| c.rsplit('-').next().unwrap_or("").to_owned());
    children
}

/// The contender keys of an etcd range, by create revision.
async fn etcd_queue(client: &mut etcd_client::Client, range: &str) -> Vec<String> {
    let options = etcd_client::GetOptions::new()
        .with_prefix()
        .with_sort(
            etcd_client::SortTarget::Create,
            etcd_client::SortOrder::Ascend,
        )
        .with_keys_only();
    let listed = client.get(range, Some(options)).await.expect("etcd range");
    listed
        .kvs()
        .iter()
        .map(|kv| kv.key_str().unwrap().to_owned())
        .collect()
}

/// Waits until `queue` (read at the server) has `n` contenders, and returns them.
async fn until_queued<F, Fut>(mut queue: F, n: usize) -> Vec<String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let now = queue().await;
        if now.len() >= n {
            return now;
        }
        assert!(Instant::now() < until, "never {n} contenders: {now:?}");
        sleep(Duration::from_millis(5)).await;
    }
}

/// While `held` (the first holder's `is_held`) says so, `other` (another process's try,
/// released at once when granted) is tried every 50 ms for [`WATCH`]: the first grant while
/// the first holder still says it holds is two holders. `None` when there was none.
async fn second_holder<H, F, Fut>(held: H, mut other: F) -> Option<String>
where
    H: Fn() -> bool,
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let until = Instant::now() + WATCH;
    while Instant::now() < until && held() {
        if other().await && held() {
            return Some("another process was granted while the holder still said it holds".into());
        }
        sleep(Duration::from_millis(50)).await;
    }
    None
}

/// A fault that falls between a create and the call right after it: the proxy delays every
/// byte by `delay` (a call and its answer take `2 × delay`, under the op timeout), and once the
/// create is seen at the server, `mode` (a stall or a cut) takes the link for `hold`.
struct Fault {
    delay: Duration,
    mode: ProxyMode,
    hold: Duration,
}

impl Fault {
    /// The stall of the ZooKeeper tests: 400 ms of delay under an op timeout `op` of 2 s, then
    /// the link held until halfway through the next attempt's call. The failed call times out
    /// `delay + op` after the create was seen, the next attempt sends its call within a pause
    /// of 100 ms, and that call is held until the link heals, `delay + 1.5 × op` after the
    /// create was seen: its answer then comes after the answer to every request held before
    /// it (a clean-up's listing among them), and before the requests those answers cause.
    fn zookeeper_stall(op: Duration) -> Self {
        let delay = Duration::from_millis(400);
        Fault {
            delay,
            mode: ProxyMode::Stall,
            hold: op * 3 / 2 - delay,
        }
    }

    /// Seen at the server at `delay` after it was sent, the create is answered at `2 × delay`,
    /// and the call sent right after it reaches the server at `3 × delay` and is answered at
    /// `4 × delay`: the fault starts halfway between the two answers, `delay` from each.
    async fn strike(&self, proxy: &TcpProxy) {
        sleep(self.delay * 2).await;
        proxy.set_mode(self.mode);
        sleep(self.hold).await;
        proxy.set_mode(ProxyMode::Pass);
    }
}

/// One trial of a permits waiter whose first attempt's create is answered and whose listing
/// right after it is not: `a` (behind `proxy`) asks for 2 of 2 permits of `key` and waits;
/// `fault` falls between the create (seen in `queue`, read at the server) and the listing.
/// `b` (no proxy) then tries to take 2 of 2 while A holds.
async fn permits_waiter_through_a_fault<Q, Fut>(
    (a, b): (&Locker, &Locker),
    proxy: &TcpProxy,
    key: &str,
    fault: &Fault,
    mut queue: Q,
) -> Result<(), String>
where
    Q: FnMut() -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    proxy.set_mode(ProxyMode::Delay(fault.delay));
    let waiter = {
        let (a, key) = (a.clone(), key.to_owned());
        tokio::spawn(async move { a.semaphore(key, 2).lease(LEASE).acquire_many(2).await })
    };
    until_queued(&mut queue, 1).await;
    fault.strike(proxy).await;
    let held = waiter
        .await
        .unwrap()
        .map_err(|e| format!("A's wait failed: {e}"))?;
    let two = second_holder(
        || held.is_held(),
        || {
            let (b, key) = (b.clone(), key.to_owned());
            async move {
                match b.semaphore(key, 2).lease(LEASE).try_acquire_many(2).await {
                    Ok(Some(permits)) => {
                        let _ = permits.release().await;
                        true
                    }
                    _ => false,
                }
            }
        },
    )
    .await;
    let left = queue().await;
    let outcome = match (two, held.is_held()) {
        (Some(two), _) => Err(format!(
            "{two}: A holds 2 of 2, and the queue at the server is {left:?}"
        )),
        (None, false) => Err(format!("A lost its permits; the queue is {left:?}")),
        (None, true) if left.len() != 1 => Err(format!(
            "A holds 2 of 2 but the queue at the server is {left:?}"
        )),
        (None, true) => Ok(()),
    };
    let _ = held.release().await;
    outcome
}

/// Issue 45, ZooKeeper: a waiter for 2 of 2 permits whose first attempt's listing timed out
/// (see [`Fault::zookeeper_stall`]). The failed attempt's give-back deleted every znode of its
/// tag, the waiter's turn included, after the next attempt was granted on that turn: A held 2
/// of 2 with no znode, and B was granted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_permits_waiter_whose_listing_timed_out_keeps_its_turn() {
    let zk = ZkServer::start().await;
    let proxy = TcpProxy::start(zk.addr()).await;
    let op = Duration::from_secs(2);
    let a = zk_locker(&proxy.addr().to_string(), op).await;
    let b = zk_locker(&zk.connect_string(), op).await;
    let raw = zk::Client::connect(&zk.connect_string()).await.unwrap();
    for trial in 0..3 {
        let key = format!("turn-{trial}");
        let container = zk_container("sem", &key);
        let queue = || zk_queue(&raw, &container);
        let fault = Fault::zookeeper_stall(op);
        let outcome = permits_waiter_through_a_fault((&a, &b), &proxy, &key, &fault, queue).await;
        if let Err(e) = outcome {
            panic!("trial {trial}: {e}");
        }
    }
}

/// The control of the test above: a hold of the link (200 ms) that leaves every call within
/// the op timeout fails none, and nothing is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_permits_waiter_through_a_short_stall_holds_alone() {
    let zk = ZkServer::start().await;
    let proxy = TcpProxy::start(zk.addr()).await;
    let op = Duration::from_secs(2);
    let a = zk_locker(&proxy.addr().to_string(), op).await;
    let b = zk_locker(&zk.connect_string(), op).await;
    let raw = zk::Client::connect(&zk.connect_string()).await.unwrap();
    let key = "turn-control";
    let container = zk_container("sem", key);
    let queue = || zk_queue(&raw, &container);
    let fault = Fault {
        hold: Duration::from_millis(200),
        ..Fault::zookeeper_stall(op)
    };
    permits_waiter_through_a_fault((&a, &b), &proxy, key, &fault, queue)
        .await
        .unwrap();
}

/// Issue 45, etcd: a waiter for 2 of 2 permits whose first attempt's listing failed on a cut
/// link (cut for 1 s). The failed attempt's give-back deleted its key by name, at once and
/// again after 2 × op timeout, after the next attempt was granted on that key: A's key was
/// gone while A held, and B was granted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_permits_waiter_whose_listing_failed_keeps_its_turn() {
    let etcd = EtcdServer::start().await;
    let proxy = TcpProxy::start(etcd.addr()).await;
    let op = Duration::from_millis(800);
    let a = etcd_locker(&format!("http://{}", proxy.addr()), op).await;
    let b = etcd_locker(&etcd.endpoint(), op).await;
    let raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    for trial in 0..3 {
        let key = format!("turn-{trial}");
        let range = format!("leasehold:sem:{{{key}}}/");
        let queue = || {
            let (mut raw, range) = (raw.clone(), range.clone());
            async move { etcd_queue(&mut raw, &range).await }
        };
        let fault = Fault {
            delay: Duration::from_millis(250),
            mode: ProxyMode::Cut,
            hold: Duration::from_secs(1),
        };
        let outcome = permits_waiter_through_a_fault((&a, &b), &proxy, &key, &fault, queue).await;
        if let Err(e) = outcome {
            panic!("trial {trial}: {e}");
        }
    }
}

/// What a writer of the lock's queue holds: a lock, a leadership.
trait Hold: Send + Sized + 'static {
    /// Whether it still says it holds.
    fn holds(&self) -> bool;
    /// Gives it back.
    fn give_up(self) -> impl Future<Output = Result<(), LockError>> + Send;
}

impl Hold for LockGuard {
    fn holds(&self) -> bool {
        self.is_held()
    }

    fn give_up(self) -> impl Future<Output = Result<(), LockError>> + Send {
        self.release()
    }
}

impl Hold for Leadership {
    fn holds(&self) -> bool {
        self.is_leader()
    }

    fn give_up(self) -> impl Future<Output = Result<(), LockError>> + Send {
        self.resign()
    }
}

/// How a writer takes `key` from a locker, waiting up to a while (`None`: busy).
type Take<H> = fn(Locker, String, Duration) -> BoxFuture<Option<H>>;

type BoxFuture<T> = std::pin::Pin<Box<dyn Future<Output = T> + Send>>;

/// Three trials of a writer whose waiting znode an operator deleted: `H` holds, `A` (behind
/// the proxy) waits; the operator deletes A's znode; A's next attempt finds it gone and queues
/// anew, and the look after that create times out (see [`Fault::zookeeper_stall`]) while H
/// gives up. A is granted on the wait's next attempt; `C` then tries while A holds. `kind` is
/// the queue's container (`lock`, `leader:lock`).
async fn writer_requeued_after_an_operator_deleted_its_znode<H: Hold>(kind: &str, take: Take<H>) {
    let zk = ZkServer::start().await;
    let proxy = TcpProxy::start(zk.addr()).await;
    let hosts = zk.connect_string();
    let op = Duration::from_secs(2);
    let h = zk_locker(&hosts, op).await;
    let a = zk_locker(&proxy.addr().to_string(), op).await;
    let c = zk_locker(&hosts, op).await;
    let raw = zk::Client::connect(&hosts).await.unwrap();
    let fault = Fault::zookeeper_stall(op);
    for trial in 0..3 {
        let key = format!("deleted-{trial}");
        let container = zk_container(kind, &key);
        let queue = || zk_queue(&raw, &container);
        let held = take(h.clone(), key.clone(), Duration::from_secs(10))
            .await
            .expect("the first writer holds");
        let waiter = tokio::spawn(take(a.clone(), key.clone(), Duration::from_secs(20)));
        let queued = until_queued(queue, 2).await;
        proxy.set_mode(ProxyMode::Delay(fault.delay));
        // The operator deletes the waiter's znode; its next attempt (within a second) finds
        // it gone and queues anew, and the look after that create fails. The holder goes
        // meanwhile: the attempt after it finds the new znode first.
        raw.delete(&format!("{container}/{}", queued[1]), None)
            .await
            .unwrap();
        until_queued(queue, 2).await;
        let ((), gave_up) = tokio::join!(fault.strike(&proxy), held.give_up());
        gave_up.unwrap();
        let holds = waiter.await.unwrap().expect("the waiter holds");
        let two = second_holder(
            || holds.holds(),
            || {
                let taken = take(c.clone(), key.clone(), Duration::ZERO);
                async move {
                    match taken.await {
                        Some(other) => {
                            let _ = other.give_up().await;
                            true
                        }
                        None => false,
                    }
                }
            },
        )
        .await;
        let left = queue().await;
        assert!(two.is_none(), "trial {trial}: {two:?}; the queue: {left:?}");
        assert!(holds.holds(), "trial {trial}: the waiter lost its hold");
        assert_eq!(left.len(), 1, "trial {trial}: {left:?}");
        holds.give_up().await.unwrap();
    }
}

/// Issue 45, ZooKeeper: an operator deleted a waiting writer's znode, and the attempt that
/// queued anew failed after its create (see [`writer_requeued_after_an_operator_deleted_its_znode`]).
/// The failed attempt's give-back deleted every znode of its tag, the new turn included, after
/// the next attempt was granted on it: C was granted while A held. (Without the operator's
/// delete, the wait's first attempt makes its turn, and a failed first attempt's turn is
/// replaced, not reused.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_writer_requeued_after_an_operator_deleted_its_znode_holds_alone() {
    writer_requeued_after_an_operator_deleted_its_znode("lock", |l, key, wait| {
        Box::pin(async move {
            let taken = l.lock(key).lease(LEASE).wait(wait).acquire().await;
            taken.ok()
        })
    })
    .await;
}

/// The same for an election: its lock is a writer's queue like any other, and a campaigner
/// that waited is elected on the wait's turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_campaigner_requeued_after_an_operator_deleted_its_znode_leads_alone() {
    writer_requeued_after_an_operator_deleted_its_znode("leader:lock", |l, key, wait| {
        Box::pin(async move {
            let taken = l.leader(key).lease(LEASE).wait(wait).campaign().await;
            taken.ok()
        })
    })
    .await;
}

/// How long a waiter whose future is not polled keeps its contender at most: the recipe's
/// `MAX_INTEREST` (2 s) after its wait's last attempt ended, plus one look over the waiters
/// (250 ms) and one delete; or, if the future stopped being polled in the middle of an
/// attempt, `MAX_INTEREST` plus the longest a polled attempt runs (2 × connect timeout + 12 ×
/// op timeout) after that attempt began.
fn lapse_bound(op: Duration) -> Duration {
    Duration::from_millis(2250) + CONNECT * 2 + op * 12
}

/// Risk of issue 45: `A`'s waiting future (op timeout 500 ms), polled a while (its contender
/// queued behind `H`'s hold), is then held and never polled again. Once H gives up, `B`'s wait must not be kept
/// out by A's contender for longer than [`lapse_bound`] (B waits three times that, for a
/// loaded machine; without the lapse it waited for the whole session's life). Polled again,
/// A's wait queues anew and gets the lock after B. `queue` reads the lock's queue at the
/// server; `lockers` are H, A and B, each a session of its own.
async fn an_unpolled_waiter_lapses<Q, Fut>(lockers: [Locker; 3], key: &str, mut queue: Q)
where
    Q: FnMut() -> Fut,
    Fut: Future<Output = Vec<String>>,
{
    let [h, a, b] = lockers;
    let op = Duration::from_millis(500);
    let held = h.lock(key).lease(LEASE).acquire().await.unwrap();
    let mut waiting = Box::pin(
        a.lock(key)
            .lease(LEASE)
            .wait(Duration::from_secs(120))
            .acquire(),
    );
    // Polled until its contender is in the queue, and a little longer: then held, unpolled.
    let polled = async {
        until_queued(&mut queue, 2).await;
        sleep(Duration::from_millis(1500)).await;
    };
    tokio::select! {
        got = &mut waiting => panic!("A got the lock while H held it: {got:?}"),
        () = polled => {}
    }
    let bound = lapse_bound(op);
    let next = {
        let (b, key) = (b.clone(), key.to_owned());
        tokio::spawn(async move {
            let asked = Instant::now();
            let got = b.lock(key).lease(LEASE).wait(bound * 3).acquire().await;
            (got, asked.elapsed())
        })
    };
    until_queued(&mut queue, 3).await;
    held.release().await.unwrap();
    let (got, waited) = next.await.unwrap();
    let left = queue().await;
    let guard = got.unwrap_or_else(|e| {
        panic!(
            "B was kept out {waited:?} by a waiter that is not polled ({e}); the queue: {left:?}"
        )
    });
    println!("a waiter that is not polled kept B out {waited:?} (bound {bound:?})");
    assert_eq!(left.len(), 1, "only B's contender is left: {left:?}");
    // Polled again, A queues anew, behind B, and gets the lock once B goes.
    let b_goes = async {
        until_queued(&mut queue, 2).await;
        guard.release().await.unwrap();
    };
    let (got, ()) = tokio::join!(&mut waiting, b_goes);
    let got = got.expect("A's wait, polled again, gets the lock");
    got.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_a_waiter_that_is_not_polled_lapses() {
    let zk = ZkServer::start().await;
    let hosts = zk.connect_string();
    let op = Duration::from_millis(500);
    let lockers = [
        zk_locker(&hosts, op).await,
        zk_locker(&hosts, op).await,
        zk_locker(&hosts, op).await,
    ];
    let raw = zk::Client::connect(&hosts).await.unwrap();
    let container = zk_container("lock", "unpolled");
    an_unpolled_waiter_lapses(lockers, "unpolled", || zk_queue(&raw, &container)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_a_waiter_that_is_not_polled_lapses() {
    let etcd = EtcdServer::start().await;
    let op = Duration::from_millis(500);
    let lockers = [
        etcd_locker(&etcd.endpoint(), op).await,
        etcd_locker(&etcd.endpoint(), op).await,
        etcd_locker(&etcd.endpoint(), op).await,
    ];
    let raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    let queue = || {
        let mut raw = raw.clone();
        async move { etcd_queue(&mut raw, "leasehold:lock:{unpolled}/").await }
    };
    an_unpolled_waiter_lapses(lockers, "unpolled", queue).await;
}
