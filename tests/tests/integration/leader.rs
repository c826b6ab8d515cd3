//! Leader election across worker processes (the `leader_worker` binary) on a real Redis,
//! judged from their event logs: exactly one leader at any instant by belief, terms strictly
//! increasing, a SIGSTOPped leader deposed and told so when it resumes (and its blind write
//! with the old term refused by the fenced resource), a SIGKILLed leader replaced, and
//! followers observing every change.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use leasehold::{Leader, Locker};
use leasehold_tests::harness::RedisServer;
use leasehold_tests::history::monotonic_ns;
use tokio::time::{sleep, timeout, Instant};

const WORKERS: usize = 3;
const ELECTION: &str = "history:leader";
const LEASE: Duration = Duration::from_secs(1);
const RUN: Duration = Duration::from_secs(16);
/// A leadership that lasts this long is seen by every follower: wake-ups take
/// milliseconds, the poll every observer also runs takes at most a second.
const SURELY_SEEN: Duration = Duration::from_millis(2500);

/// One `leader_worker` process; killed (and thawed) on drop.
struct Worker {
    child: Option<Child>,
    log: PathBuf,
}

impl Worker {
    fn spawn(id: usize, dir: &Path, lock_url: &str, resource_url: &str) -> Worker {
        let log = dir.join(format!("leader-{id}.log"));
        let out = std::fs::File::create(dir.join(format!("leader-{id}.out"))).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_leader_worker"));
        cmd.arg(id.to_string())
            .arg(&log)
            .arg(lock_url)
            .arg(resource_url)
            .arg(RUN.as_millis().to_string())
            .arg(LEASE.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        let child = cmd.spawn().expect("start leader_worker");
        Worker {
            child: Some(child),
            log,
        }
    }

    fn signal(&mut self, sig: libc::c_int) {
        if let Some(child) = self.child.as_mut() {
            if let Ok(None) = child.try_wait() {
                // SAFETY: a plain syscall on our own unreaped child, whose pid cannot be reused.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, sig);
                }
            }
        }
    }

    fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    fn exited(&mut self) -> bool {
        match self.child.as_mut() {
            None => true,
            Some(child) => !matches!(child.try_wait(), Ok(None)),
        }
    }

    fn events(&self) -> Vec<Event> {
        parse(&std::fs::read_to_string(&self.log).unwrap_or_default())
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill9();
    }
}

#[derive(Clone, Debug)]
struct Event {
    t: u64,
    kind: String,
    fields: Vec<String>,
}

impl Event {
    fn term(&self) -> u64 {
        self.fields
            .first()
            .and_then(|f| f.parse().ok())
            .unwrap_or(0)
    }
}

fn parse(log: &str) -> Vec<Event> {
    log.lines()
        .filter_map(|line| {
            let mut parts = line.split(' ');
            let t = parts.next()?.parse().ok()?;
            let kind = parts.next()?.to_owned();
            Some(Event {
                t,
                kind,
                fields: parts.map(str::to_owned).collect(),
            })
        })
        .collect()
}

/// Each fenced write of a log as (its `win`, its `wok`): a worker writes one at a time, so a
/// `wok` answers the `win` just before it.
fn writes(log: &[Event]) -> Vec<(&Event, &Event)> {
    let steps: Vec<&Event> = log
        .iter()
        .filter(|e| matches!(e.kind.as_str(), "win" | "wok" | "werr"))
        .collect();
    steps
        .windows(2)
        .filter(|w| w[0].kind == "win" && w[1].kind == "wok")
        .map(|w| (w[0], w[1]))
        .collect()
}

/// The leader right now, read by a fresh observer.
async fn current_leader(locker: &Locker) -> Option<Leader> {
    let mut observer = locker.observe_leader(ELECTION).unwrap();
    timeout(Duration::from_secs(2), observer.next())
        .await
        .ok()
        .and_then(Result::ok)
        .flatten()
}

fn worker_of(leader: &Leader) -> usize {
    leader.identity()[1..].parse().expect("identities are wN")
}

/// One leadership as its worker's log tells it.
#[derive(Debug)]
struct Term {
    worker: usize,
    term: u64,
    elected: u64,
    /// The last time `is_leader()` was seen true (before asking).
    last_belief: u64,
    /// When it resigned or saw the loss; `None` when the worker was killed first.
    ended: Option<u64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_by_belief_terms_increase_paused_leader_deposed_followers_observe() {
    let (locks, resource) = (RedisServer::start().await, RedisServer::start().await);
    let dir = std::env::temp_dir().join(format!("leasehold-leader-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut workers: Vec<Worker> = (0..WORKERS)
        .map(|id| Worker::spawn(id, &dir, &locks.url(), &resource.url()))
        .collect();
    let locker = Locker::connect(&locks.url()).await.unwrap();
    let mut resource_conn = redis::Client::open(resource.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();

    // Someone leads within a few seconds.
    let started = Instant::now();
    while current_leader(&locker).await.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nobody was elected"
        );
        sleep(Duration::from_millis(50)).await;
    }
    sleep(Duration::from_secs(2)).await;

    // Pause the leader in the middle of its leadership (its log must end inside one).
    let mut paused = None;
    for _ in 0..20 {
        let Some(leader) = current_leader(&locker).await else {
            sleep(Duration::from_millis(100)).await;
            continue;
        };
        let w = worker_of(&leader);
        let pause_t = monotonic_ns();
        workers[w].signal(libc::SIGSTOP);
        sleep(Duration::from_millis(100)).await;
        let last = workers[w]
            .events()
            .into_iter()
            .rev()
            .find(|e| matches!(e.kind.as_str(), "elected" | "resign" | "lost"));
        if last.is_some_and(|e| e.kind == "elected" && e.term() == leader.term()) {
            paused = Some((w, leader.term(), pause_t));
            break;
        }
        workers[w].signal(libc::SIGCONT);
        sleep(Duration::from_millis(300)).await;
    }
    let (p, p_term, pause_t) = paused.expect("caught a leader in its leadership");

    // A successor is elected and writes with its newer term while the leader sleeps.
    let deadline = Instant::now() + LEASE * 3 + Duration::from_secs(5);
    let successor = loop {
        assert!(
            Instant::now() < deadline,
            "the paused leader was never replaced"
        );
        if let Some(leader) = current_leader(&locker).await {
            if leader.term() > p_term {
                let fence: Option<u64> = redis::cmd("HGET")
                    .arg(format!("resource:{ELECTION}"))
                    .arg("fence")
                    .query_async(&mut resource_conn)
                    .await
                    .unwrap();
                if fence.is_some_and(|f| f >= leader.term()) {
                    break leader;
                }
            }
        }
        sleep(Duration::from_millis(50)).await;
    };
    assert_ne!(worker_of(&successor), p);
    let heal_t = monotonic_ns();
    workers[p].signal(libc::SIGCONT);

    // Later, SIGKILL whoever leads: the next one takes over after the lease.
    sleep(Duration::from_secs(2)).await;
    let mut killed = None;
    if let Some(leader) = current_leader(&locker).await {
        let w = worker_of(&leader);
        let kill_t = monotonic_ns();
        workers[w].kill9();
        killed = Some((w, kill_t));
    }
    let (k, kill_t) = killed.expect("someone led before the kill");

    // The run ends: every worker resigns and stops.
    let until = Instant::now() + RUN + Duration::from_secs(15);
    while !workers.iter_mut().all(Worker::exited) {
        assert!(Instant::now() < until, "a worker hung");
        sleep(Duration::from_millis(100)).await;
    }
    let nobody = timeout(Duration::from_secs(5), async {
        while current_leader(&locker).await.is_some() {
            sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        nobody.is_ok(),
        "a leader is still recorded after every worker left"
    );

    // Judge the logs.
    let logs: Vec<Vec<Event>> = workers.iter().map(Worker::events).collect();
    let report = format!("logs in {}", dir.display());
    let mut terms: BTreeMap<u64, Term> = BTreeMap::new();
    for (w, events) in logs.iter().enumerate() {
        for e in events {
            match e.kind.as_str() {
                "elected" => {
                    assert_eq!(e.fields.get(1).map(String::as_str), Some(&*format!("w{w}")));
                    let old = terms.insert(
                        e.term(),
                        Term {
                            worker: w,
                            term: e.term(),
                            elected: e.t,
                            last_belief: e.t,
                            ended: None,
                        },
                    );
                    assert!(old.is_none(), "term {} elected twice; {report}", e.term());
                }
                "h" => {
                    let term = terms.get_mut(&e.term()).expect("a belief before election");
                    assert_eq!(term.worker, w);
                    term.last_belief = term.last_belief.max(e.t);
                }
                "resign" | "lost" => {
                    if let Some(term) = terms.get_mut(&e.term()) {
                        term.ended = Some(e.t);
                    }
                }
                _ => {}
            }
        }
    }
    assert!(terms.len() >= 4, "too few leaderships to judge: {terms:?}");

    // Terms strictly increase in the order leaders were elected, and beliefs never overlap.
    let mut by_time: Vec<&Term> = terms.values().collect();
    by_time.sort_by_key(|t| t.elected);
    for pair in by_time.windows(2) {
        assert!(
            pair[0].term < pair[1].term,
            "term {} was elected after term {}; {report}",
            pair[1].term,
            pair[0].term
        );
        assert!(
            pair[0].last_belief < pair[1].elected,
            "w{} still believed it led (term {}) when w{} was elected (term {}); {report}",
            pair[0].worker,
            pair[0].term,
            pair[1].worker,
            pair[1].term
        );
    }

    // The paused leader: replaced while it slept, told when it woke, its write refused.
    let paused_log = &logs[p];
    assert!(
        terms
            .values()
            .any(|t| t.term > p_term && t.elected > pause_t && t.elected < heal_t),
        "no successor was elected while w{p} was paused; {report}"
    );
    // A belief is timed before `is_leader()` is asked, so one sampled after waking must be
    // false. (Between `pause_t` and the signal's delivery the worker still runs, and may
    // rightly believe it leads; overlap with the successor is judged above.)
    assert!(
        !paused_log
            .iter()
            .any(|e| e.kind == "h" && e.term() == p_term && e.t > heal_t),
        "w{p} believed it led after it woke; {report}"
    );
    // Told: `is_leader()` turned false with `lost()` resolved, or (when the pause caught it
    // in the last turn of its hold) its resign was refused as lost.
    let told = paused_log
        .iter()
        .find(|e| e.term() == p_term && e.t > heal_t && matches!(e.kind.as_str(), "lost" | "rserr"))
        .unwrap_or_else(|| panic!("w{p} was never told it was deposed; {report}"));
    let resigned = told.kind == "rserr";
    assert_eq!(
        told.fields.get(1).map(String::as_str),
        Some(if resigned { "lock_lost" } else { "1" }),
        "{} did not say the leadership was lost; {report}",
        if resigned { "resign()" } else { "lost()" }
    );
    // A write is judged by when it was invoked (`win`), not when its reply was logged: one
    // sent before the pause may be accepted then and logged only after waking.
    let late_writes: Vec<&Event> = writes(paused_log)
        .into_iter()
        .filter(|(invoked, done)| done.term() == p_term && invoked.t > heal_t)
        .map(|(_, done)| done)
        .collect();
    assert!(
        resigned || !late_writes.is_empty(),
        "w{p} wrote nothing after waking; {report}"
    );
    assert!(
        late_writes
            .iter()
            .all(|e| e.fields.get(1).map(String::as_str) == Some("0")),
        "the deposed leader's write with term {p_term} was accepted; {report}"
    );
    assert!(
        terms.values().any(|t| t.elected > kill_t),
        "nobody was elected after w{k} was killed; {report}"
    );

    // Followers: what they saw was true, in increasing terms, and no long leadership missed.
    let elected: BTreeSet<(u64, String)> = terms
        .values()
        .map(|t| (t.term, format!("w{}", t.worker)))
        .collect();
    for (w, events) in logs.iter().enumerate() {
        let seen: Vec<(u64, String)> = events
            .iter()
            .filter(|e| e.kind == "obs" && e.term() > 0)
            .map(|e| (e.term(), e.fields[1].clone()))
            .collect();
        for pair in seen.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "w{w} saw terms go back: {pair:?}; {report}"
            );
        }
        for s in &seen {
            assert!(
                elected.contains(s),
                "w{w} saw a leader never elected: {s:?}; {report}"
            );
        }
        let alive_from = events.first().map_or(u64::MAX, |e| e.t);
        let alive_until = if w == k {
            kill_t
        } else {
            events
                .iter()
                .rev()
                .find(|e| e.kind == "end")
                .map_or(0, |e| e.t)
        };
        for t in terms.values() {
            let Some(ended) = t.ended else { continue };
            let long = ended - t.elected >= SURELY_SEEN.as_nanos() as u64;
            let watched = t.elected > alive_from && ended < alive_until;
            let asleep = w == p && t.elected < heal_t && ended > pause_t;
            if long && watched && !asleep {
                assert!(
                    seen.iter().any(|(term, _)| *term == t.term),
                    "w{w} never saw term {} of w{} ({} ms); {report}",
                    t.term,
                    t.worker,
                    (ended - t.elected) / 1_000_000
                );
            }
        }
    }
    drop(workers);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lead_forever` (issue 31): two instances on one Redis lead in turns, each term's task run
/// by one of them at a time with a larger term than the last, and closing a locker ends its
/// loop with `Closed` (a plain `run_while_leader` loop written by hand would campaign on a
/// closed locker for ever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lead_forever_takes_turns_with_rising_terms_and_ends_when_the_locker_closes() {
    use std::sync::{Arc, Mutex};

    let redis = RedisServer::start().await;
    let runs: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
    let inside: Arc<Mutex<Option<usize>>> = Arc::default();
    let mut lockers = Vec::new();
    let mut loops = Vec::new();
    for id in 0..2 {
        let locker = Locker::connect(&redis.url()).await.unwrap();
        lockers.push(locker.clone());
        let (runs, inside) = (runs.clone(), inside.clone());
        loops.push(tokio::spawn(async move {
            locker
                .leader("forever")
                .identity(format!("pod-{id}"))
                .lead_forever(move |leader: Leader| {
                    let (runs, inside) = (runs.clone(), inside.clone());
                    async move {
                        assert_eq!(inside.lock().unwrap().replace(id), None, "two leaders");
                        runs.lock().unwrap().push((id, leader.term()));
                        sleep(Duration::from_millis(20)).await;
                        inside.lock().unwrap().take();
                    }
                })
                .await
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while runs.lock().unwrap().len() < 20 {
        assert!(Instant::now() < deadline, "{:?}", runs.lock().unwrap());
        sleep(Duration::from_millis(20)).await;
    }
    for locker in &lockers {
        let _ = locker.close().await;
    }
    for handle in loops {
        let ended = timeout(Duration::from_secs(10), handle)
            .await
            .expect("the loop ends once its locker is closed")
            .unwrap();
        assert!(
            matches!(ended, Err(leasehold::LockError::Closed)),
            "{ended:?}"
        );
    }
    let runs = runs.lock().unwrap().clone();
    assert!(
        runs.windows(2).all(|w| w[0].1 < w[1].1),
        "terms rise: {runs:?}"
    );
    // A resigning leader lets the other, waiting, campaigner in: both lead.
    for id in 0..2 {
        assert!(
            runs.iter().filter(|(who, _)| *who == id).count() >= 3,
            "{runs:?}"
        );
    }
}

/// Issue 51: `LeaderStatus`, the handle a status endpoint keeps, on a real Redis. It shows
/// the term `lead_forever`'s task runs in, and nothing in the other instance's; once the
/// leadership's lock is deleted behind its back (the watchdog finds it gone), the old term
/// shows nowhere and the next, larger one in its leader's status alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_status_follows_the_engine_not_the_task() {
    use leasehold::LeaderStatus;
    use redis::AsyncCommands;

    let redis = RedisServer::start().await;
    let mut statuses = Vec::new();
    let (terms_tx, mut terms) = tokio::sync::mpsc::unbounded_channel();
    let mut loops = Vec::new();
    let mut lockers = Vec::new();
    for id in 0..2 {
        let locker = Locker::connect(&redis.url()).await.unwrap();
        let status = LeaderStatus::new();
        let (campaign_locker, task_status, terms_tx) =
            (locker.clone(), status.clone(), terms_tx.clone());
        loops.push(tokio::spawn(async move {
            campaign_locker
                .leader("status")
                .identity(format!("pod-{id}"))
                .lease(LEASE)
                .with_status(task_status)
                .lead_forever(move |leader: Leader| {
                    let terms_tx = terms_tx.clone();
                    async move {
                        let _ = terms_tx.send((id, leader.term()));
                        std::future::pending::<()>().await
                    }
                })
                .await
        }));
        statuses.push(status);
        lockers.push(locker);
    }
    let (first, first_term) = timeout(Duration::from_secs(10), terms.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(statuses[first].term(), Some(first_term));
    assert_eq!(
        statuses[first].leader().unwrap().identity(),
        format!("pod-{first}")
    );
    assert!(!statuses[1 - first].is_leader());

    let keys = redis.keys("leasehold:leader:lock:*").await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    let _: () = redis.conn().await.del(&keys[0]).await.expect("DEL");

    // Whichever instance leads next (the deposed one campaigns again once its watchdog finds
    // the lock gone), the new term shows in its leader's status; the old term stops showing
    // once the deposed instance learns of its loss (its next renewal, or its lease's end on
    // its own clock at the latest), never to show again.
    let (next, next_term) = timeout(Duration::from_secs(10), terms.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(next_term > first_term);
    assert_eq!(statuses[next].term(), Some(next_term));
    let statuses_now = statuses.clone();
    leasehold_tests::harness::eventually("the deposed term stops showing", LEASE * 3, || {
        let statuses = statuses_now.clone();
        async move { statuses.iter().all(|s| s.term() != Some(first_term)) }
    })
    .await;
    assert_eq!(statuses[next].term(), Some(next_term));
    assert!(!statuses[1 - next].is_leader());
    for locker in &lockers {
        let _ = locker.close().await;
    }
    for handle in loops {
        let _ = timeout(Duration::from_secs(10), handle).await;
    }
    assert!(statuses.iter().all(|s| !s.is_leader()));
}
