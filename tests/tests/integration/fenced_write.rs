//! `leasehold::fenced` against a real `redis-server`: a stale holder's write is refused after
//! a newer holder claimed or wrote the record, a late write of an older holder that lands
//! between the newer holder's read and its write loses no update when the read was a claim
//! (and does when both writes are blind: the window the claim closes), the same holder may
//! claim and write again, and tokens compare exactly, also past 2^53 and across digit counts,
//! where Lua numbers would not.

use std::collections::HashMap;
use std::time::Duration;

use leasehold::fenced::{self, FencedWrite, FENCE_CMP_LUA};
use leasehold::{LockError, Locker, LostReason};
use leasehold_tests::harness::RedisServer;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

/// 2^53: above it, Lua's doubles cannot tell neighbouring integers apart.
const TWO_POW_53: u64 = 1 << 53;

async fn locker(url: &str) -> Locker {
    Locker::builder()
        .url(url)
        .op_timeout(Duration::from_millis(500))
        .default_wait(Duration::from_secs(5))
        .build()
        .await
        .expect("connect")
}

async fn record(conn: &mut MultiplexedConnection, key: &str) -> HashMap<String, String> {
    conn.hgetall(key).await.unwrap()
}

async fn write(
    conn: &mut MultiplexedConnection,
    key: &str,
    value: &str,
    fence: u64,
) -> FencedWrite {
    fenced::write_if_newer(conn, key, &[("value", value)], fence)
        .await
        .expect("the fenced write runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holder_is_refused_after_a_newer_holder_wrote() {
    let srv = RedisServer::start().await;
    let (a, b) = (locker(&srv.url()).await, locker(&srv.url()).await);
    let mut conn = srv.conn().await;

    // A holds with a short lease and no watchdog, writes, then "pauses" past its lease.
    let stale = a
        .lock("stock:1")
        .lease(Duration::from_millis(100))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let old_fence = stale.fence();
    assert_eq!(
        write(&mut conn, "stock:1", "a1", old_fence).await,
        FencedWrite::Accepted
    );
    stale.lost().await;

    // B takes the lock once A's lease ran out, with a higher fence, and writes.
    let fresh = b.lock("stock:1").acquire().await.unwrap();
    assert!(fresh.fence() > old_fence);
    let claim = fenced::claim(&mut conn, &fresh, "stock:1").await.unwrap();
    assert_eq!(claim.get::<String>("value").unwrap().as_deref(), Some("a1"));
    claim
        .write(&mut conn, &[("value", "b")])
        .await
        .expect("the current holder writes");

    // A wakes up and writes with its old fence: the record refuses and keeps B's values.
    assert_eq!(
        write(&mut conn, "stock:1", "a2", old_fence).await,
        FencedWrite::Refused {
            newest: fresh.fence()
        }
    );
    let stored = record(&mut conn, "stock:1").await;
    assert_eq!(stored["value"], "b");
    assert_eq!(stored["fence"], fresh.fence().to_string());

    // Through its guard, A does not even send the claim: its lease is known lost.
    let early = fenced::claim(&mut conn, &stale, "stock:1")
        .await
        .map(|_| ());
    assert!(
        matches!(
            early,
            Err(LockError::Lost {
                reason: LostReason::Expired
            })
        ),
        "{early:?}"
    );
    assert_eq!(record(&mut conn, "stock:1").await, stored);
    assert!(fresh.is_held());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_still_believes_it_holds_is_refused_by_the_record() {
    let srv = RedisServer::start().await;
    let (a, b) = (locker(&srv.url()).await, locker(&srv.url()).await);
    let mut conn = srv.conn().await;

    let old = a
        .lock("stock:2")
        .lease(Duration::from_secs(30))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let old_claim = fenced::claim(&mut conn, &old, "stock:2").await.unwrap();
    old_claim.write(&mut conn, &[("value", "a")]).await.unwrap();
    // An operator frees the lock (as a failover that lost it would); B takes it and claims
    // the record: from here on A's writes are refused, before B has written anything.
    assert!(b.force_release("stock:2").await.unwrap());
    let new = b.lock("stock:2").acquire().await.unwrap();
    let new_claim = fenced::claim(&mut conn, &new, "stock:2").await.unwrap();
    assert!(
        old.is_held(),
        "the stale holder still believes (as after a pause)"
    );

    let refused = old_claim.write(&mut conn, &[("value", "stale")]).await;
    assert!(
        matches!(
            refused,
            Err(LockError::Lost {
                reason: LostReason::StaleFence
            })
        ),
        "{refused:?}"
    );
    assert!(!old.is_held(), "the guard is told of its loss");
    tokio::time::timeout(Duration::from_secs(1), old.lost())
        .await
        .expect("lost() resolves");
    new_claim.write(&mut conn, &[("value", "b")]).await.unwrap();
    let stored = record(&mut conn, "stock:2").await;
    assert_eq!(stored["value"], "b");
    assert_eq!(stored["fence"], new.fence().to_string());
}

#[tokio::test]
async fn the_same_holder_writing_again_is_accepted() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let mut conn = srv.conn().await;

    assert_eq!(
        write(&mut conn, "k", "first", 33).await,
        FencedWrite::Accepted
    );
    assert_eq!(
        write(&mut conn, "k", "retry", 33).await,
        FencedWrite::Accepted
    );
    assert_eq!(record(&mut conn, "k").await["value"], "retry");

    // A retry through a guard, as after a timeout whose claim or write may have happened.
    let guard = locker.lock("k2").acquire().await.unwrap();
    for value in ["once", "again"] {
        let claim = fenced::claim(&mut conn, &guard, "k2").await.unwrap();
        claim.write(&mut conn, &[("value", value)]).await.unwrap();
        claim.write(&mut conn, &[("value", value)]).await.unwrap();
    }
    let stored = record(&mut conn, "k2").await;
    assert_eq!(stored["value"], "again");
    assert_eq!(stored["fence"], guard.fence().to_string());
}

#[tokio::test]
async fn fences_past_2_pow_53_compare_exactly() {
    let srv = RedisServer::start().await;
    let mut conn = srv.conn().await;

    // As doubles these two are the same number; a `tonumber` comparison accepts the older.
    let (newer, older) = (TWO_POW_53 + 1, TWO_POW_53);
    assert_eq!(
        write(&mut conn, "big", "newer", newer).await,
        FencedWrite::Accepted
    );
    assert_eq!(
        write(&mut conn, "big", "older", older).await,
        FencedWrite::Refused { newest: newer }
    );
    assert_eq!(record(&mut conn, "big").await["value"], "newer");
    assert_eq!(
        write(&mut conn, "big", "next", newer + 1).await,
        FencedWrite::Accepted
    );

    // The top of the range, and a token as long as u64::MAX.
    assert_eq!(
        write(&mut conn, "top", "max", u64::MAX).await,
        FencedWrite::Accepted
    );
    assert_eq!(
        write(&mut conn, "top", "one less", u64::MAX - 1).await,
        FencedWrite::Refused { newest: u64::MAX }
    );
    assert_eq!(
        write(&mut conn, "top", "again", u64::MAX).await,
        FencedWrite::Accepted
    );
}

#[tokio::test]
async fn fences_of_different_digit_counts_compare_by_value() {
    let srv = RedisServer::start().await;
    let mut conn = srv.conn().await;

    // As text "9" > "10"; as tokens 10 is newer.
    assert_eq!(
        write(&mut conn, "d", "ten", 10).await,
        FencedWrite::Accepted
    );
    assert_eq!(
        write(&mut conn, "d", "nine", 9).await,
        FencedWrite::Refused { newest: 10 }
    );
    assert_eq!(
        write(&mut conn, "d", "hundred", 100).await,
        FencedWrite::Accepted
    );
    assert_eq!(
        write(&mut conn, "d", "max", u64::MAX).await,
        FencedWrite::Accepted,
        "20 digits after 3"
    );
    assert_eq!(
        write(&mut conn, "d", "2^53", TWO_POW_53).await,
        FencedWrite::Refused { newest: u64::MAX }
    );
    assert_eq!(record(&mut conn, "d").await["value"], "max");
}

#[tokio::test]
async fn a_first_write_is_accepted_and_records_its_fence() {
    let srv = RedisServer::start().await;
    let mut conn = srv.conn().await;

    let fields = [("left", "7"), ("by", "a")];
    let first = fenced::write_if_newer(&mut conn, "new", &fields, 12)
        .await
        .unwrap();
    assert_eq!(first, FencedWrite::Accepted);
    let stored = record(&mut conn, "new").await;
    let expected: HashMap<String, String> = [("left", "7"), ("by", "a"), ("fence", "12")]
        .into_iter()
        .map(|(f, v)| (f.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(stored, expected);

    // A record written before it was fenced has no token yet: any token is accepted.
    let _: () = conn.hset("legacy", "left", 3).await.unwrap();
    assert_eq!(
        write(&mut conn, "legacy", "x", 5).await,
        FencedWrite::Accepted
    );
    // Recording the token only: nothing else changes, and older writers are refused after.
    let none: [(&str, &str); 0] = [];
    let bump = fenced::write_if_newer(&mut conn, "legacy", &none, 6)
        .await
        .unwrap();
    assert_eq!(bump, FencedWrite::Accepted);
    assert_eq!(
        write(&mut conn, "legacy", "y", 5).await,
        FencedWrite::Refused { newest: 6 }
    );
    let stored = record(&mut conn, "legacy").await;
    assert_eq!(
        (stored["left"].as_str(), stored["value"].as_str()),
        ("3", "x")
    );
}

#[tokio::test]
async fn bad_input_writes_nothing() {
    let srv = RedisServer::start().await;
    let mut conn = srv.conn().await;
    assert_eq!(write(&mut conn, "r", "v", 40).await, FencedWrite::Accepted);
    let before = record(&mut conn, "r").await;

    // Overwriting the token as a field would defeat the check.
    let err = fenced::write_if_newer(&mut conn, "r", &[("value", "w"), ("fence", "99")], 50)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("`fence`"), "{err}");

    // Through the raw script: tokens that are not canonical decimals, fields without values.
    let script = redis::Script::new(fenced::WRITE_IF_NEWER_LUA);
    for args in [
        &["041", "value", "w"][..],
        &["-1"],
        &["1e20"],
        &["50", "value"],
    ] {
        let reply: redis::RedisResult<redis::Value> =
            script.key("r").arg(args).invoke_async(&mut conn).await;
        assert!(reply.is_err(), "{args:?}: {reply:?}");
    }
    assert_eq!(record(&mut conn, "r").await, before);

    // A `fence` field that other code filled with something else is not guessed at.
    let _: () = conn.hset("odd", "fence", "1.7e+15").await.unwrap();
    assert!(
        fenced::write_if_newer(&mut conn, "odd", &[("value", "v")], 2)
            .await
            .is_err()
    );
    assert!(!record(&mut conn, "odd").await.contains_key("value"));
}

/// The comparison that scripts of one's own start with agrees with `u64`'s order on tokens
/// around every boundary where a shortcut would break: digit counts, 2^53, and 2^64 − 1.
#[tokio::test]
async fn the_lua_comparison_agrees_with_u64_order() {
    let srv = RedisServer::start().await;
    let mut conn = srv.conn().await;
    // All pairs in one call: {cmp(a1, b1), cmp(a2, b2), ...} and whether each a is a token.
    let cmp = redis::Script::new(&format!(
        "{FENCE_CMP_LUA}
        local order, canonical = {{}}, {{}}
        for i = 1, #ARGV, 2 do
          order[#order + 1] = leasehold_fence_cmp(ARGV[i], ARGV[i + 1])
          canonical[#canonical + 1] = leasehold_is_fence(ARGV[i]) and 1 or 0
        end
        return {{order, canonical}}"
    ));

    let mut tokens = vec![0, 1, 9, 10, 11, 99, 100, 1 << 32, u64::MAX - 1, u64::MAX];
    for base in [TWO_POW_53, 1 << 63, 10_000_000_000_000_000_000] {
        tokens.extend([base - 2, base - 1, base, base + 1, base + 2]);
    }
    // And some spread over the range (xorshift, fixed seed, so failures reproduce).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..12 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        tokens.extend([x, x >> (x % 60), x.wrapping_add(1)]);
    }

    let pairs: Vec<(u64, u64)> = tokens
        .iter()
        .flat_map(|&a| tokens.iter().map(move |&b| (a, b)))
        .collect();
    let mut call = cmp.prepare_invoke();
    for &(a, b) in &pairs {
        call.arg(a).arg(b);
    }
    let (order, canonical): (Vec<i64>, Vec<i64>) = call.invoke_async(&mut conn).await.unwrap();
    assert_eq!(order.len(), pairs.len());
    for ((a, b), got) in pairs.iter().zip(order) {
        assert_eq!(got, a.cmp(b) as i64, "leasehold_fence_cmp({a}, {b})");
    }
    assert!(canonical.iter().all(|&c| c == 1));
}

/// The premise of the 2^53 tests: Redis's Lua cannot tell these tokens apart as numbers, so a
/// `tonumber` comparison (as the demo's scripts had) would accept the older writer.
#[tokio::test]
async fn tonumber_cannot_tell_tokens_past_2_pow_53_apart() {
    let srv = RedisServer::start().await;
    let mut conn = srv.conn().await;
    let equal: i64 = redis::Script::new("return tonumber(ARGV[1]) == tonumber(ARGV[2]) and 1 or 0")
        .arg(TWO_POW_53 + 1)
        .arg(TWO_POW_53)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(equal, 1);
}

/// The stock of `key` as a sale sees it.
async fn left(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    let left: Option<i64> = conn.hget(key, "left").await.unwrap();
    left.unwrap_or(0)
}

/// Issue 44's window, by hand, with the two holders' fences: A (the older) reads 5 and sends
/// its write of 4, which is late; B reads 5; A's write lands; B writes 4. With blind writes
/// both are accepted and a sale is lost; with claims, B's claim comes first and A's late
/// write is refused.
#[tokio::test]
async fn a_late_write_between_the_next_holders_read_and_write_loses_a_sale_unless_it_claimed() {
    let srv = RedisServer::start().await;
    let mut conn = srv.conn().await;
    let (a, b) = (33, 65);

    // Blind writes, as the README's recipe was: the window is open.
    let _: () = conn.hset("blind", "left", 5).await.unwrap();
    let a_read = left(&mut conn, "blind").await;
    let b_read = left(&mut conn, "blind").await;
    let a_late = fenced::write_if_newer(&mut conn, "blind", &[("left", a_read - 1)], a)
        .await
        .unwrap();
    let b_write = fenced::write_if_newer(&mut conn, "blind", &[("left", b_read - 1)], b)
        .await
        .unwrap();
    assert_eq!(
        (a_late, b_write),
        (FencedWrite::Accepted, FencedWrite::Accepted)
    );
    assert_eq!(
        left(&mut conn, "blind").await,
        4,
        "two sales, one item sold"
    );

    // Claims: each holder's read is its claim, the first touch.
    let _: () = conn.hset("claimed", "left", 5).await.unwrap();
    let fenced::Claimed::Yes(a_record) = fenced::claim_with_fence(&mut conn, "claimed", a)
        .await
        .unwrap()
    else {
        panic!("A claims first");
    };
    let fenced::Claimed::Yes(b_record) = fenced::claim_with_fence(&mut conn, "claimed", b)
        .await
        .unwrap()
    else {
        panic!("B is newer");
    };
    let a_read: i64 = a_record.get("left").unwrap().unwrap();
    let b_read: i64 = b_record.get("left").unwrap().unwrap();
    let a_late = fenced::write_if_claimed(&mut conn, "claimed", &[("left", a_read - 1)], a)
        .await
        .unwrap();
    assert_eq!(a_late, FencedWrite::Refused { newest: b });
    let b_write = fenced::write_if_claimed(&mut conn, "claimed", &[("left", b_read - 1)], b)
        .await
        .unwrap();
    assert_eq!(b_write, FencedWrite::Accepted);
    assert_eq!(
        left(&mut conn, "claimed").await,
        4,
        "one sale, one item sold"
    );
    // A's claim again is refused too: it comes after B's.
    assert_eq!(
        fenced::claim_with_fence(&mut conn, "claimed", a)
            .await
            .unwrap(),
        fenced::Claimed::Refused { newest: b }
    );

    // A write of A that landed before B's claim is what B reads: nothing is lost either way.
    let _: () = conn.hset("early", "left", 5).await.unwrap();
    let claimed = fenced::claim_with_fence(&mut conn, "early", a)
        .await
        .unwrap();
    assert!(claimed.is_claimed());
    let early = fenced::write_if_claimed(&mut conn, "early", &[("left", 4)], a)
        .await
        .unwrap();
    assert_eq!(early, FencedWrite::Accepted);
    let fenced::Claimed::Yes(b_record) = fenced::claim_with_fence(&mut conn, "early", b)
        .await
        .unwrap()
    else {
        panic!("B is newer");
    };
    assert_eq!(b_record.get::<i64>("left").unwrap(), Some(4));
}

#[tokio::test]
async fn a_claim_reads_the_record_and_its_writes_need_the_claim() {
    let srv = RedisServer::start().await;
    let locker = locker(&srv.url()).await;
    let mut conn = srv.conn().await;

    // A record that does not exist is created by the claim, with nothing but the claim.
    let guard = locker.lock("fresh").acquire().await.unwrap();
    let claim = fenced::claim(&mut conn, &guard, "fresh").await.unwrap();
    assert!(claim.record().is_empty());
    assert_eq!(claim.fence(), guard.fence());
    assert_eq!(claim.key(), "fresh");
    claim
        .write(&mut conn, &[("left", "3"), ("by", "a")])
        .await
        .unwrap();
    let again = fenced::claim(&mut conn, &guard, "fresh").await.unwrap();
    let fields: HashMap<&str, &[u8]> = again.record().fields().collect();
    assert_eq!(fields.len(), 2, "the claim is not a field: {fields:?}");
    assert_eq!(again.get::<i64>("left").unwrap(), Some(3));
    assert!(again.get::<i64>("by").is_err(), "\"a\" is not a number");

    // A record deleted since its claim: the write finds no claim, and says so.
    let _: () = conn.del("fresh").await.unwrap();
    let err = again.write(&mut conn, &[("left", "2")]).await.unwrap_err();
    assert!(matches!(err, LockError::Config { .. }), "{err:?}");
    assert!(err.to_string().contains("claim the record again"), "{err}");
    assert!(guard.is_held(), "no newer holder: the lease is not lost");
    assert!(record(&mut conn, "fresh").await.is_empty());

    // A write without a claim is refused the same way (nothing there carries this fence).
    let unclaimed = fenced::write_if_claimed(&mut conn, "never", &[("left", "1")], 7)
        .await
        .unwrap();
    assert_eq!(unclaimed, FencedWrite::Refused { newest: 0 });
    // And the field that holds the claim cannot be written through a claim either.
    let claim = fenced::claim(&mut conn, &guard, "fresh").await.unwrap();
    let bad = claim
        .write(&mut conn, &[("fence", "99")])
        .await
        .unwrap_err();
    assert!(bad.is_unavailable(), "{bad:?}");
    assert!(bad.to_string().contains("`fence`"), "{bad}");
}

/// A transfer under a claim of each record is written whole or not at all: an older holder
/// whose claim of one record was overtaken writes neither, and says which one refused.
#[tokio::test]
async fn several_claimed_records_are_written_together_or_not_at_all() {
    let srv = RedisServer::start().await;
    let mut conn = srv.conn().await;
    let (old, new) = (33, 65);
    for key in ["{w}:1", "{w}:2"] {
        let _: () = conn.hset(key, "balance", 100).await.unwrap();
        assert!(fenced::claim_with_fence(&mut conn, key, old)
            .await
            .unwrap()
            .is_claimed());
    }
    // A newer holder claims only the second record.
    assert!(fenced::claim_with_fence(&mut conn, "{w}:2", new)
        .await
        .unwrap()
        .is_claimed());
    let debit = [("balance", 90)];
    let credit = [("balance", 110)];
    let refused = fenced::write_all_if_claimed(
        &mut conn,
        &[("{w}:1", old, &debit[..]), ("{w}:2", old, &credit[..])],
    )
    .await
    .unwrap();
    assert_eq!(
        refused,
        fenced::FencedWrites::Refused {
            index: 1,
            newest: new
        }
    );
    assert_eq!(left_field(&mut conn, "{w}:1").await, 100, "nothing written");
    assert_eq!(left_field(&mut conn, "{w}:2").await, 100, "nothing written");

    // With guards: both keys of a lock_all, claimed and written at once.
    let locker = locker(&srv.url()).await;
    let both = locker
        .lock_all(["wallet:1", "wallet:2"])
        .acquire()
        .await
        .unwrap();
    let from = fenced::claim(&mut conn, both.guard("wallet:1").unwrap(), "{w}:1")
        .await
        .unwrap();
    let to = fenced::claim(&mut conn, both.guard("wallet:2").unwrap(), "{w}:2")
        .await
        .unwrap();
    let (a, b): (i64, i64) = (
        from.get("balance").unwrap().unwrap(),
        to.get("balance").unwrap().unwrap(),
    );
    fenced::write_all(
        &mut conn,
        &[
            (&from, &[("balance", a - 10)]),
            (&to, &[("balance", b + 10)]),
        ],
    )
    .await
    .unwrap();
    assert_eq!(left_field(&mut conn, "{w}:1").await, 90);
    assert_eq!(left_field(&mut conn, "{w}:2").await, 110);
}

async fn left_field(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    let value: Option<i64> = conn.hget(key, "balance").await.unwrap();
    value.unwrap_or(0)
}

/// Every primitive that guards a write claims the same way: a leader with its term, a permit
/// holder with its permit's fence; a newer leader's claim refuses the deposed one's write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaders_and_permit_holders_claim_with_their_fence() {
    let srv = RedisServer::start().await;
    let (a, b) = (locker(&srv.url()).await, locker(&srv.url()).await);
    let mut conn = srv.conn().await;

    let permit = a.semaphore("payments", 1).acquire().await.unwrap();
    let claim = fenced::claim(&mut conn, &permit, "payments").await.unwrap();
    assert_eq!(claim.fence(), permit.fence());
    claim.write(&mut conn, &[("calls", 1)]).await.unwrap();
    permit.release().await.unwrap();

    let first = a
        .leader("jobs")
        .lease(Duration::from_millis(300))
        .watchdog(false)
        .campaign()
        .await
        .unwrap();
    let deposed_claim = fenced::claim(&mut conn, &first, "jobs").await.unwrap();
    assert_eq!(deposed_claim.fence(), first.term());
    // Its term ends (a fixed-length term); the next leader claims the record.
    first.lost().await;
    let second = b.leader("jobs").campaign().await.unwrap();
    assert!(second.term() > first.term());
    let claim = fenced::claim(&mut conn, &second, "jobs").await.unwrap();
    let refused = deposed_claim.write(&mut conn, &[("ran", "first")]).await;
    assert!(
        matches!(refused, Err(LockError::Lost { .. })),
        "{refused:?}"
    );
    // And by the record itself, whatever the deposed leader believes: its term is older.
    let by_record = fenced::write_if_claimed(&mut conn, "jobs", &[("ran", "first")], first.term())
        .await
        .unwrap();
    assert_eq!(
        by_record,
        FencedWrite::Refused {
            newest: second.term()
        }
    );
    claim.write(&mut conn, &[("ran", "second")]).await.unwrap();
    assert_eq!(record(&mut conn, "jobs").await["ran"], "second");
}
