//! Hostile prefixes and names against a real `redis-server`, through the public API, judged by
//! what Redis saw: every key each primitive touched (keyspace notifications) and every channel
//! it published on. Property: all names of one primitive share one cluster slot, and no two
//! primitives — locks, read locks, semaphores, elections, under any prefixes — touch one name
//! (issue 46: the lock `jobs` of the prefix `svc:leader` was the election `jobs` of `svc`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use leasehold::{LockError, Locker, MAX_KEY_LEN};
use leasehold_tests::harness::RedisServer;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::keys::{cases, hostile_key, locker, slot};

/// What a case takes: one primitive of a prefix. Read locks and locks of one key are one lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Primitive {
    Lock,
    Read,
    Semaphore,
    Election,
}

impl Primitive {
    /// The primitives that own separate data: a read lock's is its lock's.
    fn family(self) -> Primitive {
        match self {
            Primitive::Read => Primitive::Lock,
            other => other,
        }
    }
}

/// The prefix of the channels the test's own barriers are published on.
const BARRIER: &str = "hostile-names-barrier:";

/// Keyspace events that Redis raises itself, not a client's command.
const OWN_EVENTS: &[&[u8]] = &[b"expired", b"evicted"];

/// Every key Redis changed (its keyspace notifications) and every channel published on, as
/// one blocking subscriber to `*` sees them, in the server's order.
struct Seen {
    rx: mpsc::Receiver<Vec<u8>>,
    stop: Arc<AtomicBool>,
    barriers: Cell<u64>,
}

impl Seen {
    async fn start(srv: &RedisServer) -> Seen {
        let mut conn = srv.conn().await;
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("KA")
            .query_async(&mut conn)
            .await
            .expect("CONFIG SET notify-keyspace-events");
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let client = srv.client();
        let stopped = stop.clone();
        std::thread::spawn(move || {
            let mut conn = client.get_connection().expect("connect");
            let mut pubsub = conn.as_pubsub();
            pubsub.psubscribe("*").expect("PSUBSCRIBE");
            pubsub
                .set_read_timeout(Some(Duration::from_millis(200)))
                .expect("timeout");
            ready_tx.send(()).unwrap();
            while !stopped.load(Ordering::Relaxed) {
                let Ok(message) = pubsub.get_message() else {
                    continue;
                };
                let channel = message.get_channel_name().as_bytes();
                let name = match channel.strip_prefix(b"__keyspace@0__:") {
                    // Redis's own deletions (a key of an earlier case expiring now) are no
                    // command of the case's.
                    Some(_) if OWN_EVENTS.contains(&message.get_payload_bytes()) => continue,
                    Some(key) => key.to_vec(),
                    None => channel.to_vec(),
                };
                if tx.send(name).is_err() {
                    return;
                }
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("subscribed");
        Seen {
            rx,
            stop,
            barriers: Cell::new(0),
        }
    }

    /// The names seen since the last call: everything before a barrier published now, which
    /// Redis sends the subscriber after every notification of the commands that came before.
    async fn since_last(&self, srv: &RedisServer) -> BTreeSet<Vec<u8>> {
        self.barriers.set(self.barriers.get() + 1);
        let barrier = format!("{BARRIER}{}", self.barriers.get()).into_bytes();
        let mut conn = srv.conn().await;
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&barrier)
            .arg("")
            .query_async(&mut conn)
            .await
            .expect("PUBLISH");
        let mut names = BTreeSet::new();
        loop {
            let name = self
                .rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the barrier arrives");
            if name == barrier {
                return names;
            }
            if !name.starts_with(BARRIER.as_bytes()) {
                names.insert(name);
            }
        }
    }
}

impl Drop for Seen {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Takes `what` of `name` with `a`, has `b` try it too (so that the release has a waiter to
/// wake, and publishes), and gives it back. `Ok(false)`: the name is refused for this
/// primitive (an election's name that starts like the prefix's own keys).
async fn take_and_give_back(
    what: Primitive,
    a: &Locker,
    b: &Locker,
    name: &str,
) -> Result<bool, TestCaseError> {
    match what {
        Primitive::Lock | Primitive::Read => {
            let request = match what {
                Primitive::Read => a.read_lock(name),
                _ => a.lock(name),
            };
            let held = request.try_acquire().await;
            let held = held
                .map_err(|e| TestCaseError::fail(format!("{what:?} {name:?}: {e}")))?
                .ok_or_else(|| TestCaseError::fail(format!("{what:?} {name:?} was taken")))?;
            // A writer is refused while a reader holds it, and any lock while a lock does.
            let other = match what {
                Primitive::Read => b.write_lock(name).try_acquire().await,
                _ => b.lock(name).try_acquire().await,
            };
            prop_assert!(matches!(other, Ok(None)), "{name:?}: {other:?}");
            held.release()
                .await
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        Primitive::Semaphore => {
            let held = a.semaphore(name, 1).try_acquire().await;
            let held = held
                .map_err(|e| TestCaseError::fail(format!("semaphore {name:?}: {e}")))?
                .ok_or_else(|| TestCaseError::fail(format!("semaphore {name:?} was taken")))?;
            let other = b.semaphore(name, 1).try_acquire().await;
            prop_assert!(matches!(other, Ok(None)), "{name:?}: {other:?}");
            held.release()
                .await
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        Primitive::Election => {
            let campaign = a.leader(name).wait(Duration::ZERO).campaign().await;
            let leadership = match campaign {
                Ok(l) => l,
                Err(LockError::InvalidKey { .. }) => return Ok(false),
                Err(e) => return Err(TestCaseError::fail(format!("election {name:?}: {e}"))),
            };
            let other = b.leader(name).wait(Duration::ZERO).campaign().await;
            prop_assert!(
                matches!(other, Err(LockError::Busy { .. })),
                "{name:?}: {:?}",
                other.map(|l| l.term())
            );
            leadership
                .resign()
                .await
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
    Ok(true)
}

/// Prefixes without braces, made to imitate internal names: the kinds' segments, and the
/// elections' `:leader` that a prefix of its own once shared (issue 46), often, as the
/// property needs the same name under `p` and `p:leader`.
fn hostile_prefix() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(&["p", "p:leader"][..]).prop_map(str::to_owned),
        2 => prop::sample::select(
            &["p:lock", "p:fence", "p:lock:", "p:wake", "p:leaders", "p:leader:", "p:sem"][..]
        )
        .prop_map(str::to_owned),
        1 => "[a-c:%]{1,6}",
        1 => "[a-c:%]{1,4}:leader",
    ]
}

/// Mostly a few names, so that two primitives often share one; then any hostile key.
fn hostile_name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(&["jobs", "{x}", "a}:lock:{b"][..]).prop_map(str::to_owned),
        2 => hostile_key(),
    ]
}

fn primitive() -> impl Strategy<Value = Primitive> {
    prop::sample::select(
        &[
            Primitive::Lock,
            Primitive::Read,
            Primitive::Semaphore,
            Primitive::Election,
        ][..],
    )
}

/// Whether a prefix is one an election's could be (`P:leader`), the one kind of prefix the
/// library refuses beyond braces, emptiness and length.
fn imitates_an_election(prefix: &str) -> bool {
    prefix
        .strip_suffix(":leader")
        .is_some_and(|base| !base.is_empty())
}

#[test]
fn property_all_names_of_a_primitive_share_a_slot_and_no_two_primitives_share_a_name() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let srv = rt.block_on(RedisServer::start());
    let seen = rt.block_on(Seen::start(&srv));
    // The runner takes an `Fn`: state shared across cases lives in cells. Two lockers per
    // prefix, and the descriptions they write in the background (not a primitive's names).
    let lockers: RefCell<HashMap<String, Option<(Locker, Locker)>>> = RefCell::default();
    let descriptions: RefCell<BTreeSet<Vec<u8>>> = RefCell::default();
    let owner: RefCell<HashMap<Vec<u8>, (Primitive, String, String)>> = RefCell::default();
    let refused = RefCell::new(0u32);
    let mut runner = TestRunner::new(Config {
        cases: cases(128),
        // Cases share what Redis holds: a shrunk case would not stand alone.
        max_shrink_iters: 0,
        ..Config::default()
    });
    runner
        .run(
            &(primitive(), hostile_prefix(), hostile_name()),
            |(what, prefix, name)| {
                prop_assume!(name.len() <= MAX_KEY_LEN);
                rt.block_on(async {
                    let known = lockers.borrow().get(&prefix).cloned();
                    let pair = match known {
                        Some(pair) => pair,
                        None => {
                            let built = Locker::builder()
                                .url(srv.url())
                                .prefix(prefix.as_str())
                                .default_wait(Duration::ZERO)
                                .build()
                                .await;
                            let pair = match built {
                                Ok(a) => Some((a, locker(&srv, &prefix).await)),
                                Err(LockError::Config { .. }) if imitates_an_election(&prefix) => {
                                    None
                                }
                                Err(e) => {
                                    return Err(TestCaseError::fail(format!("{prefix:?}: {e}")))
                                }
                            };
                            for l in pair.iter().flat_map(|(a, b)| [a, b]) {
                                let id = &l.description().locker;
                                descriptions
                                    .borrow_mut()
                                    .insert(format!("{prefix}:locker:{{{id}}}").into_bytes());
                            }
                            lockers.borrow_mut().insert(prefix.clone(), pair.clone());
                            pair
                        }
                    };
                    let Some((a, b)) = pair else {
                        *refused.borrow_mut() += 1;
                        return Ok(());
                    };
                    seen.since_last(&srv).await;
                    if !take_and_give_back(what, &a, &b, &name).await? {
                        return Ok(());
                    }
                    let touched: Vec<Vec<u8>> = seen
                        .since_last(&srv)
                        .await
                        .into_iter()
                        .filter(|n| !descriptions.borrow().contains(n))
                        .collect();
                    prop_assert!(!touched.is_empty(), "{what:?} {name:?} touched nothing");
                    let first = slot(&touched[0]);
                    let me = (what.family(), prefix.clone(), name.clone());
                    for n in &touched {
                        let shown = String::from_utf8_lossy(n);
                        prop_assert_eq!(slot(n), first, "{:?} of {:?}: {}", what, name, shown);
                        let previous = owner.borrow_mut().insert(n.clone(), me.clone());
                        if let Some(other) = previous {
                            prop_assert_eq!(&other, &me, "two primitives share {}", shown);
                        }
                    }
                    Ok(())
                })
            },
        )
        .unwrap();
    // Most cases are new primitives with three names or more (a lock, its fence, its wake).
    let names = owner.borrow().len();
    assert!(names >= 3 * 32, "only {names} names seen");
    assert!(
        *refused.borrow() > 0,
        "no case tried a prefix that imitates an election's"
    );
}
