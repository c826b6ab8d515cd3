//! Attempts' creates sent together (`creates`) through the fake driver, whose creates take
//! 10 ms of the paused clock: attempts that meet share one call, each with its own answer;
//! two contenders of one lock never share one; and what a shared call made is cleaned up
//! after when its answer is lost or its caller left.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::tests::{recipe, request, Fake};
use super::{Driver, Role, Sequenced};
use crate::error::LockError;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::Attempt;

const CALL: Duration = Duration::from_millis(10);

fn grouping() -> Arc<Sequenced<Fake>> {
    let seq = recipe();
    seq.driver.together.store(true, Ordering::Relaxed);
    *seq.driver.create_delay.lock().unwrap() = Some(CALL);
    Arc::new(seq)
}

/// A writer's attempt on `lock` in a task of its own: its keys, its token, its answer.
type Spawned = (
    LockKeys,
    OwnerToken,
    tokio::task::JoinHandle<Result<Attempt, LockError>>,
);

fn attempt(seq: &Arc<Sequenced<Fake>>, lock: &str, waits: bool) -> Spawned {
    let (keys, token) = (LockKeys::new("t", lock), OwnerToken::generate());
    let task = {
        let (seq, keys, token) = (seq.clone(), keys.clone(), token.clone());
        tokio::spawn(async move { seq.acquire_once(&request(&keys, &token, waits)).await })
    };
    (keys, token, task)
}

/// Takes `lock` alone, before any other attempt: the first call creates only its contender.
async fn hold(seq: &Sequenced<Fake>, lock: &str) -> LockKeys {
    let (keys, token) = (LockKeys::new("t", lock), OwnerToken::generate());
    let held = seq
        .acquire_once(&request(&keys, &token, false))
        .await
        .unwrap();
    assert!(matches!(held, Attempt::Granted { .. }));
    keys
}

/// An attempt on `first`, alone, granted; then one on each of `rest`, sent while the first's
/// create is out, so that they meet in the next call: their answers.
async fn after_a_lone_one(
    seq: &Arc<Sequenced<Fake>>,
    first: &str,
    rest: [&str; 3],
) -> Vec<Result<Attempt, LockError>> {
    let first = attempt(seq, first, true);
    tokio::time::sleep(CALL / 2).await;
    let rest: Vec<_> = rest
        .into_iter()
        .map(|lock| attempt(seq, lock, true))
        .collect();
    assert!(matches!(
        first.2.await.unwrap(),
        Ok(Attempt::Granted { .. })
    ));
    let mut answers = Vec::new();
    for (_, _, task) in rest {
        answers.push(task.await.unwrap());
    }
    answers
}

/// The lock of each name a call created, as the fake names them (`<lock>/w-<tag>`).
fn locks_of(call: &[String]) -> Vec<&str> {
    call.iter()
        .map(|name| name.split('/').next().unwrap())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn attempts_that_meet_share_one_create_each_with_its_own_answer() {
    let seq = grouping();
    // `b` is held: its attempt in the shared call is behind, and does not hold up the others.
    let held_keys = hold(&seq, "b").await;
    // The first goes out alone, at once; the three that come while it is out go together.
    let answers: Vec<Attempt> = after_a_lone_one(&seq, "a", ["b", "c", "d"])
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(answers[0], Attempt::Held { remaining: None }, "b is taken");
    assert!(answers[1..]
        .iter()
        .all(|a| matches!(a, Attempt::Granted { .. })));
    let calls = seq.driver.creates.lock().unwrap().clone();
    let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1, 1, 3], "{calls:?}");
    // The taken lock's contender waits in its queue, as after a lone create.
    assert!(seq.contenders.waiting(held_keys.lock()).is_some());
}

#[tokio::test(start_paused = true)]
async fn two_contenders_of_one_lock_never_share_a_call() {
    let seq = grouping();
    let first = attempt(&seq, "x", false);
    tokio::time::sleep(CALL / 2).await;
    // Two attempts on `a` (as two fair waiters of one process would send) and one on `b`.
    let rest: Vec<_> = ["a", "a", "b"]
        .into_iter()
        .map(|lock| attempt(&seq, lock, false))
        .collect();
    first.2.await.unwrap().unwrap();
    let mut granted = 0;
    for (_, _, task) in rest {
        if matches!(task.await.unwrap().unwrap(), Attempt::Granted { .. }) {
            granted += 1;
        }
    }
    assert_eq!(granted, 2, "one of `a`'s two, and `b`");
    let calls = seq.driver.creates.lock().unwrap().clone();
    for call in &calls {
        let mut locks = locks_of(call);
        let all = locks.len();
        locks.sort_unstable();
        locks.dedup();
        assert_eq!(locks.len(), all, "a lock twice in one call: {calls:?}");
    }
    let mut sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1, 1, 2], "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn a_shared_create_whose_answer_was_lost_is_cleaned_up_by_each_give_back() {
    let seq = grouping();
    let first = attempt(&seq, "x", false);
    tokio::time::sleep(CALL / 2).await;
    seq.driver.fail("create_many", 0);
    let rest: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|lock| attempt(&seq, lock, true))
        .collect();
    let (x_keys, x_token, x) = first;
    assert!(matches!(x.await.unwrap(), Ok(Attempt::Granted { .. })));
    let mut failed = Vec::new();
    for (keys, token, task) in rest {
        let e = task.await.unwrap().unwrap_err();
        assert!(e.is_unavailable(), "{e}");
        failed.push((keys, token));
    }
    // Applied all the same, and known nowhere here: not a waiter's turn, not a holder's.
    assert_eq!(seq.driver.names().len(), 3);
    for (keys, _) in &failed {
        assert!(seq.contenders.waiting(keys.lock()).is_none());
    }
    for (keys, token) in &failed {
        assert!(!seq.release_once(keys, token, Role::Writer).await.unwrap());
    }
    assert_eq!(seq.driver.abandoned.lock().unwrap().len(), 2);
    assert_eq!(
        seq.driver.names(),
        [seq.driver.name(&x_keys, &x_token, Role::Writer)],
        "only the holder's contender is left"
    );
}

/// A caller that stops waiting while the call carrying its create is out (its wait's deadline,
/// a cancelled task) leaves the call to the one sending it: the answer comes to nobody, and
/// its token's give-back deletes what the create made by its name, as after a lone create.
#[tokio::test(start_paused = true)]
async fn an_attempt_that_left_while_its_shared_create_was_out_leaves_nothing() {
    let seq = grouping();
    let first = attempt(&seq, "x", false);
    tokio::time::sleep(CALL / 2).await;
    let two = [attempt(&seq, "a", false), attempt(&seq, "b", false)];
    // Both are in the call on its way; the one that does not send it leaves.
    tokio::time::sleep(CALL * 3 / 4).await;
    let sender = seq.driver.senders.lock().unwrap()[0].expect("sent from a task");
    let ([(left_keys, left_token, left)], [(_, _, stays)]) = match two {
        [one, other] if one.2.id() == sender => ([other], [one]),
        [one, other] => ([one], [other]),
    };
    left.abort();
    assert!(left.await.unwrap_err().is_cancelled());
    assert!(matches!(
        first.2.await.unwrap(),
        Ok(Attempt::Granted { .. })
    ));
    let stays = stays.await.unwrap();
    assert!(matches!(stays, Ok(Attempt::Granted { .. })), "{stays:?}");
    let left_name = seq.driver.name(&left_keys, &left_token, Role::Writer);
    let calls = seq.driver.creates.lock().unwrap().clone();
    assert!(
        calls
            .iter()
            .any(|call| call.len() == 2 && call.contains(&left_name)),
        "the one that left went in the shared call: {calls:?}"
    );
    // Applied, and known nowhere here: not a waiter's turn, not a holder's.
    assert!(seq.driver.names().contains(&left_name));
    assert!(seq.contenders.waiting(left_keys.lock()).is_none());
    // Its token's give-back finds it by its name and deletes it, and nothing else.
    assert!(!seq
        .release_once(&left_keys, &left_token, Role::Writer)
        .await
        .unwrap());
    assert_eq!(
        *seq.driver.abandoned.lock().unwrap(),
        std::slice::from_ref(&left_name)
    );
    assert!(!seq.driver.names().contains(&left_name));
    assert_eq!(
        seq.driver.names().len(),
        2,
        "x's and the other's contenders"
    );
}

#[tokio::test(start_paused = true)]
async fn a_batch_taken_together_rides_with_single_creates_and_stays_all_or_nothing() {
    let seq = grouping();
    hold(&seq, "b").await;
    let first = attempt(&seq, "x", false);
    tokio::time::sleep(CALL / 2).await;
    // `a` and `b` together (`b` is held), beside a single attempt on `c`.
    let together = {
        let seq = seq.clone();
        tokio::spawn(async move {
            let keys = [LockKeys::new("t", "a"), LockKeys::new("t", "b")];
            let tokens = [OwnerToken::generate(), OwnerToken::generate()];
            let batch = [
                request(&keys[0], &tokens[0], false),
                request(&keys[1], &tokens[1], false),
            ];
            seq.acquire_together(&batch).await
        })
    };
    let (_, _, c) = attempt(&seq, "c", false);
    assert!(matches!(
        first.2.await.unwrap(),
        Ok(Attempt::Granted { .. })
    ));
    assert!(matches!(c.await.unwrap(), Ok(Attempt::Granted { .. })));
    let answers = together.await.unwrap().unwrap();
    assert_eq!(answers, vec![Attempt::Held { remaining: None }; 2]);
    let calls = seq.driver.creates.lock().unwrap().clone();
    let mut sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
    sizes.sort_unstable();
    assert_eq!(
        sizes,
        [1, 1, 3],
        "the batch and the single create in one call: {calls:?}"
    );
    // Nothing of the batch is left: the holder's, `x`'s and `c`'s contenders only.
    assert_eq!(seq.driver.names().len(), 3, "{:?}", seq.driver.names());
}

#[tokio::test(start_paused = true)]
async fn a_refused_shared_call_is_sent_again_alone_so_only_its_lock_fails() {
    let seq = grouping();
    let refused = LockKeys::new("t", "no");
    *seq.driver.refused.lock().unwrap() = Some(refused.lock().to_owned());
    // The refused lock's create meets two others in one call, which the engine refuses.
    let answers = after_a_lone_one(&seq, "a", ["no", "c", "d"]).await;
    assert_eq!(
        seq.driver.senders.lock().unwrap().len(),
        1,
        "the three met in one call"
    );
    assert!(
        matches!(answers[0], Err(LockError::Config { .. })),
        "the refused lock: {:?}",
        answers[0]
    );
    for (lock, answer) in ["c", "d"].iter().zip(&answers[1..]) {
        assert!(
            matches!(answer, Ok(Attempt::Granted { .. })),
            "{lock}, beside the refused lock: {answer:?}"
        );
    }
    // Each of the two was created once, alone, after the refused call.
    let creates = seq.driver.creates.lock().unwrap().clone();
    assert_eq!(creates.len(), 3, "{creates:?}");
    assert!(
        creates[1..].iter().all(|call| call.len() == 1),
        "{creates:?}"
    );
}
