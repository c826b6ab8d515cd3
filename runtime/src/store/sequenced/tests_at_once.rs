//! A batch taken together (`together`) through the fake driver: all or nothing at one
//! creation order, and nothing left behind by a batch that is not granted, whose answer is
//! lost, or that fails after its answer came.

use super::tests::{recipe, request};
use super::{Role, FENCE_SLOTS};
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt};

/// A lock on `w`, a reader's share of `r`, none waiting.
fn batch<'a>(
    w: &'a LockKeys,
    r: &'a LockKeys,
    tokens: &'a [OwnerToken; 2],
) -> [AcquireRequest<'a>; 2] {
    [
        request(w, &tokens[0], false),
        AcquireRequest {
            kind: LeaseKind::Read,
            ..request(r, &tokens[1], false)
        },
    ]
}

fn two_tokens() -> [OwnerToken; 2] {
    [OwnerToken::generate(), OwnerToken::generate()]
}

#[tokio::test]
async fn free_keys_are_taken_together_at_one_order_and_released_one_by_one() {
    let seq = recipe();
    let (w, r) = (LockKeys::new("t", "w"), LockKeys::new("t", "r"));
    let tokens = two_tokens();
    let attempts = seq.acquire_together(&batch(&w, &r, &tokens)).await.unwrap();
    // One creation order (the fake's first): the writer's fences are `1 × 32 + 2`.
    assert_eq!(attempts[0], Attempt::granted(FENCE_SLOTS + 2));
    assert!(
        matches!(attempts[1], Attempt::Granted { .. }),
        "{attempts:?}"
    );
    assert_eq!(seq.driver.names().len(), 2);
    assert!(seq.contenders.held(&tokens).iter().all(Option::is_some));
    assert_eq!(
        given_back_one_by_one(&seq, &w, &r, &tokens).await,
        [true, true]
    );
    assert!(seq.driver.names().is_empty());
}

#[tokio::test]
async fn a_batch_with_a_key_taken_takes_nothing_and_leaves_nothing() {
    let seq = recipe();
    let (w, r) = (LockKeys::new("t", "w"), LockKeys::new("t", "r"));
    // A writer holds the read key.
    let holder = OwnerToken::generate();
    let held = seq
        .acquire_once(&request(&r, &holder, false))
        .await
        .unwrap();
    assert!(matches!(held, Attempt::Granted { .. }));
    let tokens = two_tokens();
    let attempts = seq.acquire_together(&batch(&w, &r, &tokens)).await.unwrap();
    assert!(
        attempts.iter().all(|a| matches!(a, Attempt::Held { .. })),
        "{attempts:?}"
    );
    // Only the holder's contender is left; the batch's tokens hold nothing.
    assert_eq!(seq.driver.names().len(), 1);
    assert!(seq.contenders.held(&tokens).iter().all(Option::is_none));
}

/// The batch is applied and its answer lost: each token's give-back cleans up after its own
/// contender by its name, and nothing is left.
#[tokio::test]
async fn a_batch_whose_answer_is_lost_is_cleaned_up_by_each_tokens_give_back() {
    let seq = recipe();
    let (w, r) = (LockKeys::new("t", "w"), LockKeys::new("t", "r"));
    let tokens = two_tokens();
    seq.driver.fail("create_all", 0);
    let lost = seq.acquire_together(&batch(&w, &r, &tokens)).await;
    assert!(lost.is_err(), "{lost:?}");
    assert_eq!(seq.driver.names().len(), 2, "applied, answer lost");
    assert_eq!(
        given_back_one_by_one(&seq, &w, &r, &tokens).await,
        [false, false]
    );
    assert_eq!(seq.driver.abandoned.lock().unwrap().len(), 2);
    assert!(seq.driver.names().is_empty(), "{:?}", seq.driver.names());
}

/// The batch's answer came, and the look after it failed: its contenders are each token's,
/// and each give-back deletes its own as a release does (no clean-up by name).
#[tokio::test]
async fn a_batch_that_fails_after_its_answer_is_given_back_by_each_token() {
    let seq = recipe();
    let (w, r) = (LockKeys::new("t", "w"), LockKeys::new("t", "r"));
    let tokens = two_tokens();
    seq.driver.fail("look_all", 0);
    let failed = seq.acquire_together(&batch(&w, &r, &tokens)).await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(seq.driver.names().len(), 2);
    assert_eq!(
        given_back_one_by_one(&seq, &w, &r, &tokens).await,
        [true, true]
    );
    assert!(seq.driver.abandoned.lock().unwrap().is_empty());
    assert!(seq.driver.names().is_empty());
}

/// A batch whose delete after a taken key fails leaves its contenders to the background.
#[tokio::test]
async fn a_batch_whose_delete_fails_deletes_in_the_background() {
    let seq = recipe();
    let (w, r) = (LockKeys::new("t", "w"), LockKeys::new("t", "r"));
    let holder = OwnerToken::generate();
    seq.acquire_once(&request(&w, &holder, false))
        .await
        .unwrap();
    let tokens = two_tokens();
    seq.driver.fail("delete_all", 0);
    let attempts = seq.acquire_together(&batch(&w, &r, &tokens)).await.unwrap();
    assert!(attempts.iter().all(|a| matches!(a, Attempt::Held { .. })));
    assert_eq!(seq.driver.later.lock().unwrap().len(), 2);
    assert_eq!(seq.driver.names().len(), 1, "the holder's alone");
}

/// The writer's lock on `w` and the reader's share of `r` given back one after the other:
/// each release's answer.
async fn given_back_one_by_one(
    seq: &super::Sequenced<super::tests::Fake>,
    w: &LockKeys,
    r: &LockKeys,
    tokens: &[OwnerToken; 2],
) -> [bool; 2] {
    [
        seq.release_once(w, &tokens[0], Role::Writer).await.unwrap(),
        seq.release_once(r, &tokens[1], Role::Reader).await.unwrap(),
    ]
}

/// A lock on `w` and a reader's share of `r` taken together, for `tokens`.
async fn taken_together(
    seq: &super::Sequenced<super::tests::Fake>,
    w: &LockKeys,
    r: &LockKeys,
    tokens: &[OwnerToken; 2],
) {
    let attempts = seq.acquire_together(&batch(w, r, tokens)).await.unwrap();
    assert!(attempts
        .iter()
        .all(|a| matches!(a, Attempt::Granted { .. })));
}

/// The two given back together (`join_together`, as `MultiGuard::release` does): each
/// release's answer.
async fn given_back_together(
    seq: &super::Sequenced<super::tests::Fake>,
    w: &LockKeys,
    r: &LockKeys,
    tokens: &[OwnerToken; 2],
) -> Vec<Result<bool, crate::error::LockError>> {
    crate::store::join_together([
        seq.release_once(w, &tokens[0], Role::Writer),
        seq.release_once(r, &tokens[1], Role::Reader),
    ])
    .await
}

/// A guard's keys given back together (`join_together`, as `MultiGuard::release` does): their
/// contenders go in one `delete_all`, each release with its own answer. Given back one after
/// another, each is a `delete` of its own.
#[tokio::test]
async fn keys_given_back_together_are_deleted_in_one_call() {
    let seq = recipe();
    let (w, r) = (LockKeys::new("t", "w"), LockKeys::new("t", "r"));
    let tokens = two_tokens();
    taken_together(&seq, &w, &r, &tokens).await;
    let released = given_back_together(&seq, &w, &r, &tokens).await;
    assert!(
        released.iter().all(|r| matches!(r, Ok(true))),
        "{released:?}"
    );
    assert!(seq.driver.names().is_empty());
    assert_eq!(*seq.driver.deletes.lock().unwrap(), [("delete_all", 2)]);

    let tokens = two_tokens();
    taken_together(&seq, &w, &r, &tokens).await;
    assert_eq!(
        given_back_one_by_one(&seq, &w, &r, &tokens).await,
        [true, true]
    );
    assert_eq!(
        seq.driver.deletes.lock().unwrap()[1..],
        [("delete", 1), ("delete", 1)]
    );
}

/// One of the keys given back together is gone (an operator deleted its contender): the one
/// call deletes nothing, and each is deleted by itself, so each release answers as alone.
#[tokio::test]
async fn keys_given_back_together_one_of_them_gone_each_answer_as_alone() {
    let seq = recipe();
    let (w, r) = (LockKeys::new("t", "w"), LockKeys::new("t", "r"));
    let tokens = two_tokens();
    taken_together(&seq, &w, &r, &tokens).await;
    let writers = seq
        .driver
        .names()
        .into_iter()
        .find(|n| n.starts_with(&format!("{}/", w.lock())));
    assert!(seq.driver.remove(&writers.expect("the writer's contender")));
    let released = given_back_together(&seq, &w, &r, &tokens).await;
    assert!(matches!(released[0], Ok(false)), "{released:?}");
    assert!(matches!(released[1], Ok(true)), "{released:?}");
    assert!(seq.driver.names().is_empty());
    assert_eq!(
        *seq.driver.deletes.lock().unwrap(),
        [("delete_all", 2), ("delete", 1), ("delete", 1)]
    );
}

/// The one call fails (the engine did not answer): every release in it hears the error, and
/// their contenders are deleted in the background.
#[tokio::test]
async fn keys_given_back_together_whose_call_fails_are_deleted_in_the_background() {
    let seq = recipe();
    let (w, r) = (LockKeys::new("t", "w"), LockKeys::new("t", "r"));
    let tokens = two_tokens();
    taken_together(&seq, &w, &r, &tokens).await;
    seq.driver.fail("delete_all", 0);
    let released = given_back_together(&seq, &w, &r, &tokens).await;
    assert!(released.iter().all(Result::is_err), "{released:?}");
    assert_eq!(seq.driver.later.lock().unwrap().len(), 2);
    assert!(seq.driver.names().is_empty());
}
