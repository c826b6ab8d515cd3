//! Unit tests of the in-memory store: leases, fences that never go back, readers' fences.

use std::time::Duration;

use tokio::time::Instant;

use super::MemoryStore;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt};

fn keys(k: &str) -> LockKeys {
    LockKeys::new("t", k)
}

fn request<'a>(keys: &'a LockKeys, token: &'a OwnerToken, fences: u64) -> AcquireRequest<'a> {
    AcquireRequest {
        keys,
        token,
        lease: Duration::from_secs(1),
        validity: Duration::from_millis(980),
        sent: Instant::now(),
        fence_ttl: Duration::from_secs(60),
        fences,
        interest: Duration::ZERO,
        queued: false,
        contender: None,
        fenced: true,
        kind: crate::store::kind::LeaseKind::Exclusive,
        waiter: None,
    }
}

#[tokio::test(start_paused = true)]
async fn lease_expires_and_fences_increase_past_reservations() {
    let b = MemoryStore::new();
    let (a, c) = (OwnerToken::generate(), OwnerToken::generate());
    let k = keys("x");
    let Attempt::Granted { top: t1, .. } = b.acquire(&request(&k, &a, 5)) else {
        panic!("free lock not granted")
    };
    assert!(matches!(
        b.acquire(&request(&k, &c, 1)),
        Attempt::Held { remaining: Some(_) }
    ));
    tokio::time::advance(Duration::from_millis(1001)).await;
    let Attempt::Granted { top: t2, .. } = b.acquire(&request(&k, &c, 1)) else {
        panic!("expired lock not granted")
    };
    assert!(
        t2 > t1,
        "the next holder starts above the whole reservation"
    );
    assert!(!b.release(&k, &a), "stale owner must not release");
    assert!(b.release(&k, &c));
}

#[tokio::test(start_paused = true)]
async fn an_expired_counter_never_goes_back() {
    let b = MemoryStore::new();
    let a = OwnerToken::generate();
    let k = keys("x");
    let Attempt::Granted { top: t1, .. } = b.acquire(&request(&k, &a, 1)) else {
        panic!()
    };
    b.release(&k, &a);
    tokio::time::advance(Duration::from_secs(120)).await;
    let Attempt::Granted { top: t2, .. } = b.acquire(&request(&k, &a, 1)) else {
        panic!()
    };
    assert!(t2 > t1);
}

#[tokio::test(start_paused = true)]
async fn a_reader_fence_never_goes_back_after_the_counter_expired() {
    let b = MemoryStore::new();
    let (w, r, w2) = (
        OwnerToken::generate(),
        OwnerToken::generate(),
        OwnerToken::generate(),
    );
    let k = keys("x");
    let Attempt::Granted { top: written, .. } = b.acquire(&request(&k, &w, 1)) else {
        panic!("free lock not granted")
    };
    b.release(&k, &w);
    tokio::time::advance(Duration::from_secs(120)).await;
    let Attempt::Granted { top: read, .. } = b.acquire_shared(&request(&k, &r, 1)) else {
        panic!("reader not admitted")
    };
    assert!(read >= written, "reader's fence {read} below {written}");
    b.release_shared(&k, &r);
    let Attempt::Granted { top: later, .. } = b.acquire(&request(&k, &w2, 1)) else {
        panic!("free lock not granted")
    };
    assert!(
        later > read,
        "writer's fence {later} not above the reader's {read}"
    );
}
