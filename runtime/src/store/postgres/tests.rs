//! Unit tests of the engine's parts that need no server (the engine's own tests run against
//! a real one: `tests/tests/postgres.rs`).

use super::schema::SCHEMA;
use super::text::{check_prefix, db_text, user_key_of};
use super::url::validate;
use crate::store::apart::Owner;
use crate::store::keys::LockKeys;

#[test]
fn the_schema_bounds_fenced_transactions_by_the_documented_margin() {
    let margin = crate::postgres::FENCED_IDLE_MARGIN.as_millis();
    assert!(SCHEMA.contains(&format!("greatest(left_ms, 1) + {margin};")));
}

#[test]
fn keys_with_nul_round_trip_through_the_table() {
    let keys = LockKeys::new("p", "a\0b%00{c}");
    let stored = db_text(keys.lock());
    assert!(!stored.contains('\0'), "{stored}");
    assert_eq!(
        user_key_of(&stored, "p:lock:{").as_deref(),
        Some("a\0b%00{c}")
    );
}

#[test]
fn urls_are_checked_without_showing_passwords() {
    for bad in [
        "redis://localhost",
        "postgres://u:s3cret@h/db?sslmode=verify-all",
        "postgres://u:s3cret@h/db?bogus=1",
    ] {
        let e = validate(bad).unwrap_err().to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }
    assert!(validate("postgres://u:pw@127.0.0.1:5432/db").is_ok());
    assert!(validate("postgresql://localhost/db?application_name=x").is_ok());
}

/// PostgreSQL's names of an owner: the rows it keys, by table (`leasehold_waiters` is shared
/// by locks and semaphores), and the payload of its wake-ups. A lock's fence is its row's.
fn postgres_names(owner: &Owner) -> Vec<String> {
    let row = |table: &str, key: &str| format!("{table} {}", db_text(key));
    let Some(keys) = owner.keys() else {
        let Owner::Locker { id, .. } = owner else {
            unreachable!("a primitive has keys")
        };
        return vec![format!("leasehold_lockers {id}")];
    };
    let mut rows = match owner {
        Owner::Semaphore { .. } => vec![
            row("leasehold_semaphores", keys.lock()),
            row("leasehold_permits", keys.lock()),
        ],
        _ => vec![
            row("leasehold_locks", keys.lock()),
            row("leasehold_readers", keys.lock()),
        ],
    };
    rows.push(row("leasehold_waiters", keys.lock()));
    rows.push(row("notify", keys.wake()));
    rows.extend(owner.record().map(|r| row("leasehold_leaders", &r)));
    rows
}

/// Found by the property below (issue 46): `db_text` writes NUL as `%00`, so a prefix with
/// NUL and one with `%00` named the same rows. A prefix with NUL is refused.
#[test]
fn a_prefix_with_nul_is_refused_and_no_other_prefix_meets_another() {
    let nul = LockKeys::new("a\0b", "k");
    let spelled = LockKeys::new("a%00b", "k");
    assert_eq!(
        db_text(nul.lock()),
        db_text(spelled.lock()),
        "why it is refused"
    );
    let err = check_prefix("a\0b").unwrap_err();
    assert!(matches!(err, crate::LockError::Config { .. }), "{err}");
    assert!(err.to_string().contains("NUL"), "{err}");
    assert!(check_prefix("a%00b").is_ok());
    assert!(check_prefix("leasehold").is_ok());
}

proptest::proptest! {
    /// Every stored name of every primitive is its own on PostgreSQL (issue 46).
    #[test]
    fn postgres_names_are_apart(owners in crate::store::apart::owners()) {
        use crate::store::apart::{check_apart, Clash};
        check_apart(&owners, postgres_names, Clash::Equal, |o| {
            o.accepted() && check_prefix(o.prefix()).is_ok()
        })?;
    }
}

/// The builder refuses such a prefix for PostgreSQL before it connects (the server here does
/// not exist), and keeps it for the engines that store NUL apart.
#[tokio::test]
async fn the_builder_refuses_a_prefix_with_nul_for_postgres_only() {
    let err = crate::Locker::builder()
        .postgres("postgres://u@127.0.0.1:9/db")
        .prefix("a\0b")
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, crate::LockError::Config { .. }), "{err}");
    assert!(err.to_string().contains("NUL"), "{err}");
    assert!(crate::Locker::builder()
        .prefix("a\0b")
        .build_in_memory()
        .is_ok());
}
