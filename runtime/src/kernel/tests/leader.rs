//! Leader election on Tokio's paused clock, over the scripted store (clones of one stand for
//! processes sharing a store): one leader at a time, terms increasing, resign and drop hand
//! over through the store, observers see every change, a deposed leader is told, the
//! leader-only task is cancelled and campaigns again, campaigns are cancel-safe, bad input
//! is refused.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::store::scripted::ScriptedStore;
use crate::store::LeaderRecord;
use crate::{LockError, Locker, MAX_IDENTITY_LEN};

const LEASE: Duration = Duration::from_secs(3);

fn processes(n: usize) -> (ScriptedStore, Vec<Locker>) {
    let store = ScriptedStore::new();
    let lockers = (0..n).map(|_| Locker::scripted(store.clone())).collect();
    (store, lockers)
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test(start_paused = true)]
async fn one_leader_at_a_time_terms_increase_and_resign_hands_over() {
    let (_store, lockers) = processes(3);
    let first = lockers[0]
        .leader("scheduler")
        .identity("p0")
        .lease(LEASE)
        .campaign()
        .await
        .unwrap();
    assert!(first.is_leader());
    assert_eq!(first.identity(), "p0");
    let mut waiting = Vec::new();
    for (i, locker) in lockers.iter().enumerate().skip(1) {
        let locker = locker.clone();
        waiting.push(tokio::spawn(async move {
            locker
                .leader("scheduler")
                .identity(format!("p{i}"))
                .lease(LEASE)
                .campaign()
                .await
        }));
    }
    // Far past the lease: the watchdog keeps the leadership, nobody else gets in.
    tokio::time::sleep(LEASE * 4).await;
    assert!(first.is_leader());
    assert!(waiting.iter().all(|t| !t.is_finished()));
    let mut last = first.term();
    first.resign().await.unwrap();
    for _ in 0..2 {
        settle().await;
        let done: Vec<usize> = (0..waiting.len())
            .filter(|&i| waiting[i].is_finished())
            .collect();
        assert_eq!(done.len(), 1, "exactly one successor is elected");
        let next = waiting.remove(done[0]).await.unwrap().unwrap();
        assert!(next.term() > last, "terms strictly increase");
        last = next.term();
        next.resign().await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn observers_see_every_change_and_the_latest_state() {
    let (_store, lockers) = processes(3);
    let mut observer = lockers[2].observe_leader("scheduler").unwrap();
    assert_eq!(observer.next().await.unwrap(), None);
    let a = lockers[0]
        .leader("scheduler")
        .identity("a")
        .campaign()
        .await
        .unwrap();
    let seen = observer.next().await.unwrap().unwrap();
    assert_eq!((seen.identity(), seen.term()), ("a", a.term()));
    a.resign().await.unwrap();
    assert_eq!(
        observer.next().await.unwrap(),
        None,
        "resigning shows at once"
    );
    // Two changes before the observer looks: it gets the latest, never an older one.
    let b = lockers[1]
        .leader("scheduler")
        .identity("b")
        .campaign()
        .await
        .unwrap();
    let b_term = b.term();
    drop(b); // resigns in the background
    settle().await;
    let c = lockers[0]
        .leader("scheduler")
        .identity("c")
        .campaign()
        .await
        .unwrap();
    assert!(c.term() > b_term);
    let seen = observer.next().await.unwrap().unwrap();
    assert_eq!((seen.identity(), seen.term()), ("c", c.term()));
    // Nothing changes: next() waits (polling) without returning.
    let quiet = tokio::time::timeout(Duration::from_secs(5), observer.next()).await;
    assert!(quiet.is_err(), "an unchanged leader was returned again");
}

/// Issue 45's risk: after an observer was told that nobody leads, a lagging server (a replica,
/// a follower that missed the resignation) shows the deposed leader's record again. The
/// observer must not bring that term back: a term seen to end is over for good. A newer term
/// is shown as ever.
#[tokio::test(start_paused = true)]
async fn an_observer_never_shows_a_term_again_after_seeing_it_end() {
    let (store, lockers) = processes(2);
    let mut observer = lockers[1]
        .observe_leader("scheduler")
        .unwrap()
        .poll_every(Duration::from_millis(50));
    assert_eq!(observer.next().await.unwrap(), None);
    let first = lockers[0]
        .leader("scheduler")
        .identity("p0")
        .lease(LEASE)
        .campaign()
        .await
        .unwrap();
    let seen = observer.next().await.unwrap().unwrap();
    assert_eq!(seen.term(), first.term());
    let first_term = first.term();
    let deposed = LeaderRecord {
        term: first.term() - lockers[0].inner.fence_offset,
        identity: "p0".into(),
    };
    first.resign().await.unwrap();
    assert_eq!(
        observer.next().await.unwrap(),
        None,
        "the resignation is seen"
    );

    // A lagging server answers the next reads with the resigned leader's record.
    store.serve_stale_leader_reads(vec![Some(deposed.clone()); 3]);
    let again = tokio::time::timeout(Duration::from_secs(2), observer.next()).await;
    assert!(
        again.is_err(),
        "a term seen to end was shown again: {again:?}"
    );

    // A new leader, with a newer term, is shown.
    let second = lockers[0]
        .leader("scheduler")
        .identity("p0-again")
        .lease(LEASE)
        .campaign()
        .await
        .unwrap();
    assert!(second.term() > first_term);
    let seen = observer.next().await.unwrap().unwrap();
    assert_eq!((seen.identity(), seen.term()), ("p0-again", second.term()));
}

#[tokio::test(start_paused = true)]
async fn a_crashed_leader_lapses_for_observers_by_polling() {
    let (store, lockers) = processes(2);
    let mut observer = lockers[1].observe_leader("scheduler").unwrap();
    assert_eq!(observer.next().await.unwrap(), None);
    let a = lockers[0]
        .leader("scheduler")
        .identity("a")
        .lease(LEASE)
        .watchdog(false)
        .campaign()
        .await
        .unwrap();
    assert_eq!(observer.next().await.unwrap().unwrap().identity(), "a");
    // A crash publishes nothing: the lease runs out, and the next poll says so.
    std::mem::forget(a);
    let gone = tokio::time::timeout(LEASE * 2, observer.next()).await;
    assert_eq!(gone.expect("a poll noticed").unwrap(), None);
    drop(store);
}

#[tokio::test(start_paused = true)]
async fn a_deposed_leader_is_told_and_cannot_record_itself_again() {
    let (store, lockers) = processes(2);
    let a = lockers[0]
        .leader("scheduler")
        .identity("a")
        .lease(LEASE)
        .campaign()
        .await
        .unwrap();
    let a_token = a.owner_token().unwrap();
    let (keys, record) = a.store_keys();
    // The store stops renewing A (as if it had been paused past its lease elsewhere).
    store.refuse_renewals(u32::MAX);
    tokio::time::timeout(LEASE * 2, a.lost())
        .await
        .expect("the deposed leader is told");
    assert!(!a.is_leader());
    store.heal();
    tokio::time::sleep(LEASE).await;
    let b = lockers[1]
        .leader("scheduler")
        .identity("b")
        .campaign()
        .await
        .unwrap();
    assert!(b.term() > a.term());
    // A's record cannot come back, with its old term or any term: its token holds nothing.
    let stale = LeaderRecord {
        term: a.term(),
        identity: "a".into(),
    };
    let store_ref: &dyn crate::store::Store = &store;
    assert!(!store_ref
        .leader_records_or_refusal()
        .unwrap()
        .publish_leader(&keys, &record, &a_token, &stale)
        .await
        .unwrap());
    let mut observer = lockers[0].observe_leader("scheduler").unwrap();
    assert_eq!(observer.next().await.unwrap().unwrap().identity(), "b");
    assert!(a.resign().await.unwrap_err().is_lost());
    let quiet = tokio::time::timeout(Duration::from_millis(50), observer.next()).await;
    assert!(quiet.is_err(), "b still leads");
}

/// Regression: campaigns in one process queue behind each other, and a lock released there
/// is normally handed to the next local waiter with the same owner token. A leadership must
/// never pass that way: the successor would share the predecessor's token, so anything the
/// old leader still does with it (a late record write, a renewal) would count for the new
/// one. Every leader gets a token and a term of its own from the store.
#[tokio::test(start_paused = true)]
async fn a_leadership_is_never_handed_over_inside_the_process() {
    let locker = Locker::scripted(ScriptedStore::new());
    let x = locker
        .leader("scheduler")
        .identity("x")
        .campaign()
        .await
        .unwrap();
    let spawn = |identity: &'static str| {
        let locker = locker.clone();
        tokio::spawn(async move {
            locker
                .leader("scheduler")
                .identity(identity)
                .campaign()
                .await
        })
    };
    let a = spawn("a");
    settle().await;
    let b = spawn("b");
    settle().await;
    x.resign().await.unwrap();
    let a = a.await.unwrap().unwrap();
    let a_token = a.owner_token().unwrap();
    let (keys, record) = a.store_keys();
    let a_term = a.term();
    a.resign().await.unwrap();
    let b = b.await.unwrap().unwrap();
    assert!(b.term() > a_term);
    assert_ne!(
        b.owner_token().unwrap(),
        a_token,
        "the lease was handed over"
    );
    let forged = LeaderRecord {
        term: b.term() + 1,
        identity: "a".into(),
    };
    assert!(
        !locker
            .inner
            .store
            .leader(|records| records.publish_leader(&keys, &record, &a_token, &forged))
            .await
            .unwrap(),
        "the resigned leader's token still holds the election"
    );
    let mut observer = locker.observe_leader("scheduler").unwrap();
    let seen = observer.next().await.unwrap().unwrap();
    assert_eq!((seen.identity(), seen.term()), ("b", b.term()));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_campaign_leaves_nothing_behind() {
    let (_store, lockers) = processes(3);
    let a = lockers[0].leader("scheduler").campaign().await.unwrap();
    for locker in &lockers {
        let dropped = tokio::time::timeout(
            Duration::from_millis(100),
            locker.leader("scheduler").campaign(),
        )
        .await;
        assert!(dropped.is_err(), "elected while another leads");
    }
    a.resign().await.unwrap();
    let elected = tokio::time::timeout(
        Duration::from_millis(100),
        lockers[1].leader("scheduler").campaign(),
    )
    .await
    .expect("a cancelled campaign held the election up")
    .unwrap();
    assert!(elected.is_leader());
}

#[tokio::test(start_paused = true)]
async fn the_leader_task_is_cancelled_on_loss_and_campaigns_again() {
    let (store, lockers) = processes(1);
    let calls = Arc::new(AtomicU32::new(0));
    let terms = Arc::new(std::sync::Mutex::new(Vec::new()));
    let run = {
        let (calls, terms, store) = (calls.clone(), terms.clone(), store.clone());
        lockers[0]
            .leader("scheduler")
            .identity("me")
            .lease(LEASE)
            .run_while_leader(move |leader| {
                let (calls, terms, store) = (calls.clone(), terms.clone(), store.clone());
                async move {
                    terms.lock().unwrap().push(leader.term());
                    if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                        // The first term is lost under it: the store refuses the renewals.
                        store.refuse_renewals(1);
                        std::future::pending::<()>().await;
                    }
                    "done"
                }
            })
    };
    let out = tokio::time::timeout(LEASE * 5, run).await.unwrap().unwrap();
    assert_eq!(out, "done");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let terms = terms.lock().unwrap().clone();
    assert!(terms[1] > terms[0], "{terms:?}");
    // It resigned at the end.
    assert!(lockers[0]
        .leader("scheduler")
        .wait(Duration::ZERO)
        .campaign()
        .await
        .is_ok());
}

#[tokio::test(start_paused = true)]
async fn hostile_names_and_identities_are_refused_clearly() {
    let locker = Locker::in_memory();
    let err = locker.leader("").campaign().await.unwrap_err();
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    assert!(err.to_string().contains("name"), "{err}");
    let err = locker.observe_leader("").unwrap_err();
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    let err = locker
        .leader("x".repeat(crate::MAX_KEY_LEN + 1))
        .campaign()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::InvalidKey { .. }), "{err}");
    for internal in ["leasehold:lock:{scheduler}", "leasehold:leader:record:{x}"] {
        let err = locker.leader(internal).campaign().await.unwrap_err();
        assert!(err.to_string().contains("store's own keys"), "{err}");
        assert!(locker.observe_leader(internal).is_err());
    }
    for (identity, says) in [
        (String::new(), "empty"),
        ("x".repeat(MAX_IDENTITY_LEN + 1), "257 bytes"),
        ("pod\n7".to_owned(), "control"),
    ] {
        let err = locker
            .leader("scheduler")
            .identity(identity)
            .campaign()
            .await
            .unwrap_err();
        assert!(matches!(err, LockError::Config { .. }), "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    let err = locker
        .leader("scheduler")
        .lease(Duration::from_millis(1))
        .campaign()
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Config { .. }), "{err}");
    // The longest identity is fine, and names are stored apart from lock keys: a lock on
    // the same name, braces and all, neither blocks nor joins the election.
    let lock = locker.lock("{scheduler}").acquire().await.unwrap();
    let leader = locker
        .leader("{scheduler}")
        .identity("x".repeat(MAX_IDENTITY_LEN))
        .wait(Duration::ZERO)
        .campaign()
        .await
        .unwrap();
    assert!(lock.is_held() && leader.is_leader());
}

/// `lead_forever` on an engine that answers without waiting: a task that ends at once must
/// not keep the other tasks of its thread from running (without the yield between terms this
/// never returns), and closing the locker ends the loop with `Closed`.
#[tokio::test]
async fn lead_forever_lets_its_thread_run_and_ends_when_the_locker_closes() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let locker = crate::Locker::in_memory();
    let terms = std::sync::Arc::new(AtomicU32::new(0));
    let counted = terms.clone();
    let leading = tokio::spawn({
        let locker = locker.clone();
        async move {
            locker
                .leader("scheduler")
                .lead_forever(move |_leader| {
                    let counted = counted.clone();
                    async move {
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                })
                .await
        }
    });
    while terms.load(Ordering::SeqCst) < 3 {
        tokio::task::yield_now().await;
    }
    let _ = locker.close().await;
    let ended = tokio::time::timeout(std::time::Duration::from_secs(5), leading)
        .await
        .expect("the loop ends once the locker is closed")
        .unwrap();
    assert!(matches!(ended, Err(LockError::Closed)), "{ended:?}");
}

/// Issue 46, on one in-memory store: the election `jobs` of `svc` was the lock `jobs` of a
/// locker with the prefix `svc:leader`. Such a prefix is refused at build now; were it not,
/// its lock would have to stay apart from the election, as the lock `jobs` of the prefix next
/// to it (`svc:leaders`) does: free while the election is held, and no obstacle to a campaign
/// while it is held.
#[tokio::test(start_paused = true)]
async fn an_election_and_a_lock_of_any_prefix_stay_apart() {
    let store = ScriptedStore::new();
    // The builder's checks of the prefix, then a locker of it on the one store.
    let of = |prefix: &str| -> Result<Locker, LockError> {
        crate::LockerBuilder::default()
            .prefix(prefix)
            .build_in_memory()?;
        Ok(Locker::with_store(
            Arc::new(store.clone()),
            crate::LockerBuilder::default().prefix(prefix),
        ))
    };
    let elections = of("svc").unwrap();
    async fn apart(elections: &Locker, other: &Locker) {
        let first = elections
            .leader("jobs")
            .wait(Duration::ZERO)
            .campaign()
            .await
            .expect("elected");
        let first_term = first.term();
        let lock = other
            .lock("jobs")
            .try_acquire()
            .await
            .unwrap()
            .unwrap_or_else(|| {
                panic!(
                    "the lock `jobs` of {:?} is busy while the election `jobs` is held",
                    other.prefix()
                )
            });
        first.resign().await.unwrap();
        let second = elections
            .leader("jobs")
            .wait(Duration::ZERO)
            .campaign()
            .await
            .expect("elected while the lock is held");
        assert!(second.term() > first_term);
        second.resign().await.unwrap();
        lock.release().await.unwrap();
    }
    match of("svc:leader") {
        Err(e @ LockError::Config { .. }) => {
            assert!(e.to_string().contains("svc:leaders"), "{e}");
        }
        Ok(imitation) => apart(&elections, &imitation).await,
        Err(e) => panic!("{e}"),
    }
    apart(&elections, &of("svc:leaders").unwrap()).await;
}
