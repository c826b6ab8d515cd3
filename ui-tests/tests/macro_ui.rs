//! Compile-time behaviour of `#[distributed_lock]`: what must build (`ui/pass`, each
//! also run) and what must be refused with which message (`ui/fail` and its checked-in
//! `.stderr`). Regenerate the `.stderr` files with `TRYBUILD=overwrite` and review the diff.

#[test]
fn distributed_lock_ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
