//! `crate = "..."` for a runtime that is reachable under another name.

#![deny(warnings)]

// `::lh` is the binary's root `extern crate leasehold as lh;` (an `extern crate` in a module
// does not reach the extern prelude).

mod reexport {
    pub use lh::*;
}

#[lh::distributed_lock(key = "renamed:<id>", crate = "::lh")]
async fn renamed(id: u8) -> Result<u8, lh::LockError> {
    Ok(id)
}

#[reexport::distributed_lock(key = "module:<id>", crate = "crate::renamed_crate::reexport")]
async fn through_module(id: u8) -> Result<u8, reexport::LockError> {
    Ok(id)
}

/// Builds the future without running it: the runtime is not needed to type-check.
fn built<F: std::future::Future>(_: F) {}

pub(crate) fn main() {
    built(renamed(1));
    built(through_module(1));
}
