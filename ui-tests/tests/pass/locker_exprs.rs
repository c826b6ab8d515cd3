//! `locker = ...` takes any expression giving a `Locker`, `&Locker` or `Arc<Locker>`,
//! including temporaries.

#![deny(warnings)]

use std::sync::{Arc, OnceLock};

use leasehold::{distributed_lock, LockError, Locker};

struct AppState {
    locker: Locker,
    shared: Arc<Locker>,
}

static GLOBAL: OnceLock<Locker> = OnceLock::new();

fn global() -> &'static Locker {
    GLOBAL.get().expect("installed in main")
}

#[distributed_lock(key = "a:<id>", locker = state.locker)]
async fn field(state: &AppState, id: u8) -> Result<u8, LockError> {
    let _ = &state.shared;
    Ok(id)
}

#[distributed_lock(key = "b:<id>", locker = state.shared.clone())]
async fn arc_temporary(state: Arc<AppState>, id: u8) -> Result<u8, LockError> {
    // `state` was borrowed for the key and the locker, and is moved into the body here.
    let owned: Arc<AppState> = state;
    let _ = owned;
    Ok(id)
}

#[distributed_lock(key = "c", locker = global())]
async fn call() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "d", locker = *GLOBAL.get().unwrap())]
async fn deref_place() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "e", locker = { let s: &AppState = state; &s.locker })]
async fn block_expr(state: &AppState) -> Result<(), LockError> {
    let _ = state;
    Ok(())
}

fn assert_send<T: Send>(_: T) {}

#[allow(unreachable_code, unused_variables, clippy::diverging_sub_expression)]
pub(crate) fn main() {
    if false {
        let state: Arc<AppState> = unimplemented!();
        assert_send(field(&state, 1));
        assert_send(arc_temporary(state.clone(), 1));
        assert_send(block_expr(&state));
    }
    assert_send(call());
    assert_send(deref_place());
}
