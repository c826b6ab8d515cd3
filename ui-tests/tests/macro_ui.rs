//! Compile-time behaviour of `#[distributed_lock]`: what must be refused with which message
//! (`ui/fail` and its checked-in `.stderr`). Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite` and review the diff. What must build is `tests/pass/`, one ordinary
//! test binary.

#[test]
fn distributed_lock_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/fail/*.rs");
}
