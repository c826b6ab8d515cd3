//! Unit tests of the etcd engine's pure parts: endpoints, key names, and the bookkeeping the
//! orphan sweep relies on.

use super::endpoints::Endpoints;
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
