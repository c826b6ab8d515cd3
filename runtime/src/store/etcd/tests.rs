//! Unit tests of the etcd engine's pure parts: endpoints, key names, the bookkeeping the
//! orphan sweep relies on, and where a lock's validity counts from.

use std::time::Duration;

use tokio::time::Instant;

use super::endpoints::Endpoints;
use super::lease::counted_from;
use super::names::{key_of, lock_of, range_of};
use crate::store::keys::LockKeys;
use crate::store::sequenced::{Contender, Contenders};
use crate::store::token::OwnerToken;

/// Found by the differential test (issue 28): a key under release stays known to the
/// orphan sweep until the release's delete is answered.
#[test]
fn a_key_under_release_stays_known_to_the_sweep_until_the_delete_is_answered() {
    let contenders = Contenders::default();
    let token = OwnerToken::generate();
    let key = "p:lock:{k}/0123456789abcdef".to_owned();
    contenders.hold_alone(
        &token,
        Contender {
            name: key.clone(),
            order: 7,
            session: 1,
            via: 1_i64,
        },
    );
    let (mine, releasing) = contenders.take_for_release(&token).expect("held");
    assert_eq!(mine.name, key);
    assert!(contenders.held([&token])[0].is_none());
    assert!(
        contenders.knows(&key),
        "a sweep now would take the key under release for an orphan"
    );
    drop(releasing);
    assert!(!contenders.knows(&key));
    assert!(contenders.take_for_release(&token).is_none());
}

fn parse(list: &[&str]) -> Result<Endpoints, String> {
    Endpoints::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

#[test]
fn endpoints_lose_their_credentials_and_keep_a_scheme() {
    let e = parse(&["http://root:s%40cret@10.0.0.1:2379", "10.0.0.2:2379"]).unwrap();
    assert_eq!(e.urls, ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]);
    assert_eq!(e.user, Some(("root".into(), "s@cret".into())));
    assert!(!e.tls);
}

#[test]
fn bad_endpoints_are_refused_without_showing_passwords() {
    for (list, needle) in [
        (&[][..], "at least one"),
        (&["redis://h:1"][..], "http://"),
        (&["http://h"][..], "host:port"),
        (
            &["http://u:pw1@h:1", "http://u:pw2@h:2"][..],
            "different credentials",
        ),
        (&["http://h:1", "https://h:2"][..], "mix"),
        (&["http://:pw@h:1"][..], "no user"),
    ] {
        let err = parse(list)
            .err()
            .unwrap_or_else(|| panic!("{list:?} accepted"));
        assert!(err.contains(needle), "{err}");
        assert!(!err.contains("pw"), "{err}");
    }
}

#[test]
fn contender_keys_name_their_lock_only() {
    let keys = LockKeys::new("leasehold", "a/b}");
    let token = OwnerToken::generate();
    let key = key_of(&keys, &token);
    assert_eq!(lock_of(&key), Some(keys.lock()));
    // No other lock's range starts with this lock's.
    let other = LockKeys::new("leasehold", "a");
    assert!(!key.starts_with(&range_of(&other)));
}

/// The margin a locker of the default clock drift leaves off a lease.
fn validity(lease: Duration) -> Duration {
    crate::kernel::lease::validity(lease, crate::kernel::lease::DEFAULT_DRIFT)
}

/// A lock as long as the TTL counts from the last acknowledged keep-alive's send time: its
/// validity ends at `acked + validity`, not at `sent + validity`, and the acquire waits for
/// no keep-alive of its own while that leaves half the validity or more.
#[tokio::test(start_paused = true)]
async fn a_lock_as_long_as_the_ttl_counts_from_the_last_acknowledged_keep_alive() {
    let ttl = Duration::from_secs(9);
    let (lease, validity) = (ttl, validity(ttl));
    let acked = Instant::now();
    // A keep-alive period (a third of the TTL) later: the steady state's oldest.
    tokio::time::advance(ttl / 3).await;
    let sent = Instant::now();
    let from = counted_from(acked, ttl, sent, lease, validity).expect("no keep-alive needed");
    assert_eq!(from, acked);
    // Half the validity after the keep-alive still counts; a moment later it needs one.
    let half = acked + validity / 2;
    assert_eq!(counted_from(acked, ttl, half, lease, validity), Some(acked));
    let late = half + Duration::from_millis(1);
    assert_eq!(counted_from(acked, ttl, late, lease, validity), None);
    // A keep-alive sent after the request (acknowledged before the grant): from the send time.
    let fresh = sent + Duration::from_millis(3);
    assert_eq!(counted_from(fresh, ttl, sent, lease, validity), Some(sent));
}

/// A lock shorter than the TTL counts from as much later than the keep-alive as the TTL
/// outlasts it, scaled to the share of it counted on: its validity never ends after etcd
/// may expire the lease (`acked + TTL` less the margin of a TTL-long lease), and never
/// starts after its own send time.
#[tokio::test(start_paused = true)]
async fn a_shorter_lock_counts_on_the_lease_as_far_as_the_ttl_reaches() {
    let ttl = Duration::from_secs(10);
    let (lease, validity) = (Duration::from_secs(2), validity(Duration::from_secs(2)));
    let acked = Instant::now();
    tokio::time::advance(Duration::from_millis(8500)).await;
    let sent = Instant::now();
    let from = counted_from(acked, ttl, sent, lease, validity).expect("half of it is left");
    assert!(from < sent);
    assert!(
        from + validity <= acked + self::validity(ttl),
        "counted on past the TTL's own validity: {:?} > {:?}",
        from + validity - acked,
        self::validity(ttl)
    );
    assert!(from + validity >= sent + validity / 2);
    // Early in the keep-alive period the TTL reaches past the whole lease: from the send time.
    let soon = acked + Duration::from_secs(1);
    assert_eq!(counted_from(acked, ttl, soon, lease, validity), Some(soon));
    // Past the TTL's reach: a keep-alive of its own is needed.
    let stale = acked + Duration::from_secs(10);
    assert_eq!(counted_from(acked, ttl, stale, lease, validity), None);
}

/// etcd's names of an owner: a primitive's range of contenders' keys (an election's leader
/// record is the value of its holder's), a locker's description key on its lease. Fences are
/// create revisions, with no key of their own.
fn etcd_names(owner: &crate::store::apart::Owner) -> Vec<String> {
    use crate::store::apart::Owner;
    match owner {
        Owner::Locker {
            prefix, session, ..
        } => vec![crate::store::identity::session_key(prefix, *session)],
        _ => vec![range_of(&owner.keys().expect("a primitive"))],
    }
}

proptest::proptest! {
    /// Every stored name of every primitive is its own on etcd (issue 46), and, as a lock's
    /// contenders are read as a range, no owner's name starts another's.
    #[test]
    fn etcd_names_are_apart(owners in crate::store::apart::owners()) {
        use crate::store::apart::{check_apart, Clash, Owner};
        check_apart(&owners, etcd_names, Clash::Prefixes, Owner::accepted)?;
    }
}
