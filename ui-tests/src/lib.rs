//! Compile-time tests of `#[distributed_lock]`: see `tests/macro_ui.rs`.
