//! Unit tests of the engine's parts that need no server (the engine's own tests run against
//! a real one: `tests/tests/postgres.rs`).

use super::schema::SCHEMA;
use super::text::{db_text, user_key_of};
use super::url::validate;
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
