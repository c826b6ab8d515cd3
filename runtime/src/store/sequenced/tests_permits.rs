//! The weighted queue of semaphores and the leader records, through the pure rule and
//! through the recipe over the fake driver of `tests`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use proptest::prelude::*;
use tokio::time::Instant;

use super::leader::{decode, encode};
use super::tests::{recipe, request};
use super::{fits, holders, standing, writer_top, Driver, Head, Queued, Role, Standing};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{Attempt, LeaderRecord, PermitWaiter};

fn permits(name: &str, limit: u32, count: u32) -> Queued {
    Queued {
        name: name.into(),
        role: Role::Permits { limit, count },
        owner: 0,
    }
}

#[test]
fn a_contender_holds_when_the_permits_ahead_and_its_own_fit() {
    let q = [
        permits("a", 3, 1),
        permits("b", 3, 2),
        permits("c", 3, 1),
        permits("d", 3, 1),
    ];
    assert_eq!(standing(&q, "a", 3, 1), Standing::Holds);
    assert_eq!(standing(&q, "b", 3, 2), Standing::Holds, "1 + 2 = 3");
    assert_eq!(standing(&q, "c", 3, 1), Standing::Behind, "4 > 3");
    assert_eq!(
        standing(&q, "d", 3, 1),
        Standing::Behind,
        "FIFO: no overtaking"
    );
    assert_eq!(standing(&q, "x", 3, 1), Standing::Gone);
    // A gap (a holder went): everyone behind it moves up, by the sum, not by the place.
    let gap = [permits("a", 3, 1), permits("c", 3, 1), permits("d", 3, 1)];
    assert_eq!(standing(&gap, "d", 3, 1), Standing::Holds);
    assert_eq!(holders(&gap), (Some(3), &gap[..]));
    assert_eq!(holders(&q), (Some(3), &q[..2]));
    assert_eq!(holders(&[]), (None, &[][..]));
}

#[test]
fn a_contender_ahead_with_another_limit_is_a_disagreement() {
    let q = [permits("a", 2, 1), permits("b", 3, 1)];
    assert_eq!(standing(&q, "b", 3, 1), Standing::Disagrees { agreed: 2 });
    assert_eq!(fits(&q[..1], 5, 1), Standing::Disagrees { agreed: 2 });
    // Behind it, the same limit as the first holder's still counts what is ahead.
    assert_eq!(fits(&q[..1], 2, 1), Standing::Holds);
    // The holders stop at the first disagreeing contender.
    assert_eq!(holders(&q), (Some(2), &q[..1]));
    // Anything that is not a permits contender counts as the whole limit.
    let odd = [Queued {
        name: "w".into(),
        role: Role::Writer,
        owner: 0,
    }];
    assert_eq!(fits(&odd, 2, 1), Standing::Behind);
}

/// One step of a semaphore's life: a contender enters (with its limit and count), one leaves,
/// or one looks at where it stands (and, if it holds, counts as a holder from then on).
#[derive(Clone, Debug)]
enum Step {
    Enter { limit: u32, count: u32 },
    Leave(usize),
    Look(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (2u32..=3, 1u32..=3).prop_map(|(limit, count)| Step::Enter { limit, count }),
        (0usize..16).prop_map(Step::Leave),
        (0usize..16).prop_map(Step::Look),
        (0usize..16).prop_map(Step::Look),
    ]
}

proptest! {
    /// Whatever the order of entries, departures and looks, the contenders that were told
    /// they hold never hold more permits than their limit, all agree on it, and one told so
    /// once is told so again as long as it is in the queue.
    #[test]
    fn holders_never_exceed_the_limit(steps in proptest::collection::vec(step(), 1..120)) {
        let mut queue: Vec<Queued> = Vec::new();
        let mut held: Vec<String> = Vec::new();
        let mut next = 0;
        for step in steps {
            match step {
                Step::Enter { limit, count } => {
                    next += 1;
                    queue.push(permits(&format!("c{next}"), limit, count.min(limit)));
                }
                Step::Leave(i) if !queue.is_empty() => {
                    let gone = queue.remove(i % queue.len());
                    held.retain(|h| *h != gone.name);
                }
                Step::Look(i) if !queue.is_empty() => {
                    let q = &queue[i % queue.len()];
                    let Role::Permits { limit, count } = q.role else { unreachable!() };
                    let place = standing(&queue, &q.name, limit, count);
                    if held.contains(&q.name) {
                        prop_assert_eq!(place, Standing::Holds, "a holder stopped holding");
                    } else if place == Standing::Holds {
                        held.push(q.name.clone());
                    }
                }
                _ => {}
            }
            let holding: Vec<(u32, u32)> = queue
                .iter()
                .filter(|q| held.contains(&q.name))
                .map(|q| match q.role {
                    Role::Permits { limit, count } => (limit, count),
                    _ => unreachable!(),
                })
                .collect();
            if let Some(&(limit, _)) = holding.first() {
                prop_assert!(holding.iter().all(|h| h.0 == limit), "{:?}", holding);
                let sum: u32 = holding.iter().map(|h| h.1).sum();
                prop_assert!(sum <= limit, "{} permits held of {}: {:?}", sum, limit, queue);
            }
            // Every holder is among the holders a listing shows.
            let (_, shown) = holders(&queue);
            for h in &held {
                prop_assert!(shown.iter().any(|q| q.name == *h));
            }
        }
    }
}

/// One permits attempt of `token` for `count` of `limit`.
async fn take(
    seq: &super::Sequenced<super::tests::Fake>,
    keys: &LockKeys,
    token: &OwnerToken,
    (limit, count): (u32, u32),
    waiter: Option<PermitWaiter>,
) -> Result<Attempt, LockError> {
    let req = request(keys, token, waiter.is_some());
    seq.acquire_permits_once(&req, limit, count, waiter).await
}

fn waiter(name: u128) -> PermitWaiter {
    PermitWaiter {
        name,
        until: Instant::now() + Duration::from_secs(5),
    }
}

#[tokio::test]
async fn single_permits_that_do_not_fit_never_enter_and_a_waiter_keeps_its_turn() {
    let seq = recipe();
    let keys = LockKeys::semaphore("t", "s");
    let (a, b, w, c) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    for t in [&a, &b] {
        let got = take(&seq, &keys, t, (3, 1), None).await;
        assert!(matches!(got.unwrap(), Attempt::Granted { .. }));
    }
    // A waiter for two: behind, it keeps its contender (its turn).
    let first = take(&seq, &keys, &w, (3, 2), Some(waiter(7))).await;
    assert!(matches!(first.unwrap(), Attempt::Held { .. }));
    assert_eq!(seq.driver.names().len(), 3);
    // A single permit would fit in the limit, but not behind the waiter: it does not even
    // enter (no contender made and deleted, which would wake every waiter).
    let created = seq.driver.order.load(Ordering::Relaxed);
    let single = take(&seq, &keys, &c, (3, 1), None).await;
    assert!(matches!(single.unwrap(), Attempt::Held { .. }));
    assert_eq!(seq.driver.order.load(Ordering::Relaxed), created);
    // One holder goes: the waiter, asked again with a new token, holds with its own fence.
    assert!(seq
        .release_once(&keys, &a, Role::Permits { limit: 0, count: 1 })
        .await
        .unwrap());
    let w2 = OwnerToken::generate();
    let again = take(&seq, &keys, &w2, (3, 2), Some(waiter(7))).await;
    assert_eq!(again.unwrap(), Attempt::granted(writer_top(created, 1)));
    assert!(seq.contenders.held([&w2])[0].is_some());
    let state = seq.inspect_permits_once(&keys).await.unwrap();
    assert_eq!(state.limit, Some(3));
    let mut counts: Vec<u32> = state.holders.iter().map(|h| h.0).collect();
    counts.sort_unstable();
    assert_eq!(counts, [1, 2]);
    assert!(seq
        .release_once(&keys, &w2, Role::Permits { limit: 0, count: 2 })
        .await
        .unwrap());
    assert!(seq
        .release_once(&keys, &b, Role::Permits { limit: 0, count: 1 })
        .await
        .unwrap());
    assert!(seq.driver.names().is_empty());
}

#[tokio::test]
async fn a_waiter_that_leaves_or_disagrees_leaves_nothing_behind() {
    let seq = recipe();
    let keys = LockKeys::semaphore("t", "s");
    let (a, w, x) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    let held = take(&seq, &keys, &a, (2, 2), None).await;
    assert!(matches!(held.unwrap(), Attempt::Granted { .. }));
    let waits = take(&seq, &keys, &w, (2, 2), Some(waiter(9))).await;
    assert!(matches!(waits.unwrap(), Attempt::Held { .. }));
    seq.withdraw_permits(&keys, 9);
    assert_eq!(seq.driver.later.lock().unwrap().len(), 1);
    assert_eq!(seq.driver.names().len(), 1);
    // Another limit, waiting: it enters, finds the holder's limit ahead, and leaves.
    let e = take(&seq, &keys, &x, (3, 2), Some(waiter(10)))
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("limit of 2"), "{e}");
    assert_eq!(seq.driver.names().len(), 1);
    assert!(seq
        .contenders
        .waiting(&format!("{}#{:032x}", keys.lock(), 10))
        .is_none());
    // The release of an attempt this process does not know, and whose create it never sent,
    // has nothing to clean up after.
    let unknown = OwnerToken::generate();
    assert!(!seq
        .release_once(&keys, &unknown, Role::Permits { limit: 0, count: 1 })
        .await
        .unwrap());
    assert!(seq.driver.abandoned.lock().unwrap().is_empty());
}

/// Issue 45: a permits waiter whose first attempt made its contender (its turn) and then
/// failed to list the queue. The give-back of that attempt's token leaves the turn, which
/// belongs to the wait: the next attempt is granted on it. (Deleted by that give-back after
/// the grant, the waiter held 2 of 2 with no contender, and another process got them too.)
#[tokio::test]
async fn a_permits_waiters_turn_made_by_a_failed_attempt_is_the_waits_not_the_give_backs() {
    let seq = recipe();
    let keys = LockKeys::semaphore("t", "s");
    let (w1, w2, other) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.driver.fail("list", 0);
    let failed = take(&seq, &keys, &w1, (2, 2), Some(waiter(7))).await;
    assert!(failed.unwrap_err().is_unavailable());
    let turn = seq
        .driver
        .name(&keys, &w1, Role::Permits { limit: 2, count: 2 });
    assert_eq!(seq.driver.names(), std::slice::from_ref(&turn));
    // The failed attempt's give-back: nothing of it is its own.
    assert!(!seq
        .release_once(&keys, &w1, Role::Permits { limit: 0, count: 2 })
        .await
        .unwrap());
    assert_eq!(
        seq.driver.names(),
        std::slice::from_ref(&turn),
        "the give-back took the turn"
    );
    assert!(seq.driver.abandoned.lock().unwrap().is_empty());
    // The wait's next attempt is granted on its turn; another request does not fit.
    let granted = take(&seq, &keys, &w2, (2, 2), Some(waiter(7))).await;
    assert!(matches!(granted.unwrap(), Attempt::Granted { .. }));
    assert_eq!(seq.contenders.held([&w2])[0].as_ref().unwrap().name, turn);
    let tried = take(&seq, &keys, &other, (2, 2), None).await;
    assert!(matches!(tried.unwrap(), Attempt::Held { .. }));
    assert_eq!(seq.driver.names(), [turn]);
    assert!(seq
        .release_once(&keys, &w2, Role::Permits { limit: 0, count: 2 })
        .await
        .unwrap());
    assert!(seq.driver.names().is_empty());
}

/// Issue 45: a permits request's create that was applied but whose answer was lost is known
/// nowhere here; the give-back of its token is the one clean-up after it.
#[tokio::test]
async fn a_permits_create_whose_answer_was_lost_is_cleaned_up_by_its_give_back() {
    let seq = recipe();
    let keys = LockKeys::semaphore("t", "s");
    let w = OwnerToken::generate();
    seq.driver.fail("create", 0);
    let failed = take(&seq, &keys, &w, (2, 2), Some(waiter(7))).await;
    assert!(failed.unwrap_err().is_unavailable());
    assert_eq!(seq.driver.names().len(), 1, "applied all the same");
    assert!(!seq
        .release_once(&keys, &w, Role::Permits { limit: 0, count: 2 })
        .await
        .unwrap());
    let name = seq
        .driver
        .name(&keys, &w, Role::Permits { limit: 2, count: 2 });
    assert_eq!(*seq.driver.abandoned.lock().unwrap(), [name]);
    assert!(seq.driver.names().is_empty());
}

#[tokio::test]
async fn the_leader_record_is_the_holders_contender_and_goes_with_it() {
    let seq = recipe();
    let keys = LockKeys::new("t:leader", "e");
    let (a, b) = (OwnerToken::generate(), OwnerToken::generate());
    let Attempt::Granted { top, .. } = seq.acquire_once(&request(&keys, &a, true)).await.unwrap()
    else {
        panic!("the first campaigner leads");
    };
    assert!(
        seq.read_leader(&keys).await.unwrap().is_none(),
        "not yet published"
    );
    let term = top - 1; // the first of its fences
    let leader = LeaderRecord {
        term,
        identity: "p0".into(),
    };
    // A term that is not one of this contender's fences, or a token that holds nothing, is
    // refused.
    let forged = LeaderRecord {
        term: term + 32,
        ..leader.clone()
    };
    assert!(!seq.publish_leader(&keys, &a, &forged).await.unwrap());
    assert!(!seq.publish_leader(&keys, &b, &leader).await.unwrap());
    assert!(seq.publish_leader(&keys, &a, &leader).await.unwrap());
    assert_eq!(seq.read_leader(&keys).await.unwrap(), Some(leader.clone()));
    // Another term's clear leaves it alone; its own clears it.
    seq.clear_leader(term + 64).await.unwrap();
    assert!(seq.read_leader(&keys).await.unwrap().is_some());
    seq.clear_leader(term).await.unwrap();
    assert!(seq.read_leader(&keys).await.unwrap().is_none());
    // Released, its token holds nothing: it cannot record itself again.
    seq.publish_leader(&keys, &a, &leader).await.unwrap();
    seq.release_once(&keys, &a, Role::Writer).await.unwrap();
    assert!(!seq.publish_leader(&keys, &a, &leader).await.unwrap());
    assert!(seq.read_leader(&keys).await.unwrap().is_none());
}

#[test]
fn a_record_counts_only_with_a_term_of_its_contenders_fences() {
    let leader = LeaderRecord {
        term: 7 * 32 + 1,
        identity: "pod-7".into(),
    };
    let head = |order, data| Head { order, data };
    assert_eq!(decode(&head(7, encode(&leader))), Some(leader.clone()));
    assert_eq!(decode(&head(8, encode(&leader))), None);
    assert_eq!(decode(&head(7, b"0123456789abcdef".to_vec())), None);
    assert_eq!(decode(&head(7, Vec::new())), None);
}

/// Regression: a campaigner that waited is granted on a later attempt, with a new token,
/// the contender an earlier attempt created (named by that attempt's tag): its record is
/// written all the same. Refused, the campaign released the lock and queued again at the end.
#[tokio::test]
async fn a_leader_granted_after_waiting_records_itself() {
    let seq = recipe();
    let keys = LockKeys::new("t:leader", "e");
    let (a, b1, b2) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    seq.acquire_once(&request(&keys, &a, true)).await.unwrap();
    let waits = seq.acquire_once(&request(&keys, &b1, true)).await.unwrap();
    assert!(matches!(waits, Attempt::Held { .. }));
    seq.release_once(&keys, &a, Role::Writer).await.unwrap();
    let again = crate::store::AcquireRequest {
        queued: true,
        fences: 1,
        ..request(&keys, &b2, true)
    };
    let Attempt::Granted { top, .. } = seq.acquire_once(&again).await.unwrap() else {
        panic!("the waiting campaigner leads");
    };
    let leader = LeaderRecord {
        term: top,
        identity: "b".into(),
    };
    assert!(seq.publish_leader(&keys, &b2, &leader).await.unwrap());
    assert_eq!(seq.read_leader(&keys).await.unwrap(), Some(leader));
}

/// Risk of issue 45: a permits waiter whose future is no longer polled keeps its seat (its
/// contender) no longer than `MAX_INTEREST` after its last attempt; polled again, it queues
/// anew.
#[tokio::test(start_paused = true)]
async fn a_permits_waiters_seat_no_attempt_looks_at_lapses() {
    use super::interest::{LAPSE_CHECK, MAX_INTEREST};
    let seq = recipe();
    let keys = LockKeys::semaphore("t", "s");
    let (h, w1, w2) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    let held = take(&seq, &keys, &h, (2, 1), None).await;
    assert!(matches!(held.unwrap(), Attempt::Granted { .. }));
    let waits = take(&seq, &keys, &w1, (2, 2), Some(waiter(7))).await;
    assert!(matches!(waits.unwrap(), Attempt::Held { .. }));
    let seat = seq
        .driver
        .name(&keys, &w1, Role::Permits { limit: 2, count: 2 });
    assert_eq!(seq.driver.names().len(), 2);
    tokio::time::sleep(MAX_INTEREST + LAPSE_CHECK * 2).await;
    assert_eq!(
        *seq.driver.later.lock().unwrap(),
        std::slice::from_ref(&seat)
    );
    assert_eq!(seq.driver.names().len(), 1, "only the holder is left");
    // A single permit fits now that nobody waits ahead of it.
    let single = take(&seq, &keys, &OwnerToken::generate(), (2, 1), None).await;
    assert!(matches!(single.unwrap(), Attempt::Granted { .. }));
    // Polled again, the waiter queues anew.
    let again = take(&seq, &keys, &w2, (2, 2), Some(waiter(7))).await;
    assert!(matches!(again.unwrap(), Attempt::Held { .. }));
    assert_eq!(seq.driver.names().len(), 3);
}
