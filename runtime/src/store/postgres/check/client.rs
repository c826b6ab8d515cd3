//! What [`check_fence`](super::check_fence) runs its statement on: a connection of a driver it
//! knows (`tokio_pg`, `sqlx_pg`), reached directly or through any number of `Deref`s, so a
//! pool's connection or transaction needs no `&*`.
//!
//! One blanket impl per reference kind walks the `Deref`s, and the `Via` parameter (inferred,
//! never named by callers) records the path: impls that differ only in what a type derefs to
//! would overlap, since a driver's type may gain a `Deref` impl in a later version.

use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use crate::error::BoxError;

/// The statement every driver runs: `$1` the lock's stored key (`text`), `$2` the fence
/// (`bigint`); one `boolean` back.
pub(super) const STATEMENT: &str = "SELECT leasehold_check_fence($1, $2)";

/// SQLSTATE `undefined_function`: the transaction's database has no `leasehold_check_fence`.
pub(super) const UNDEFINED_FUNCTION: &str = "42883";

/// A driver's connection or transaction, taken as it is.
pub struct Direct;

/// A type that derefs, `Via` saying how its target reaches a connection.
pub struct Through<Via>(PhantomData<Via>);

/// The fence statement failed: the driver's error, as the driver tells it.
pub struct StatementError {
    /// The error and its causes, for messages.
    pub(super) text: String,
    /// The server answered SQLSTATE `42883` ([`UNDEFINED_FUNCTION`]).
    pub(super) undefined_function: bool,
    /// The driver's own error, kept as the source.
    pub(super) error: BoxError,
}

impl StatementError {
    pub(super) fn new(text: String, sql_state: Option<&str>, error: BoxError) -> Self {
        StatementError {
            text,
            undefined_function: sql_state == Some(UNDEFINED_FUNCTION),
            error,
        }
    }
}

/// Runs the fence statement; implemented by each driver adapter for its connection types, and
/// below for references to whatever derefs to one.
pub trait RunsFenceCheck<Via>: Sized {
    /// `SELECT leasehold_check_fence(key, fence)`: what the function answered, or why the
    /// statement failed.
    fn run_fence_check(
        self,
        key: String,
        fence: i64,
    ) -> impl Future<Output = Result<bool, StatementError>> + Send;
}

impl<'a, T, Via> RunsFenceCheck<Through<Via>> for &'a T
where
    T: Deref + ?Sized,
    &'a T::Target: RunsFenceCheck<Via>,
{
    fn run_fence_check(
        self,
        key: String,
        fence: i64,
    ) -> impl Future<Output = Result<bool, StatementError>> + Send {
        (&**self).run_fence_check(key, fence)
    }
}

impl<'a, T, Via> RunsFenceCheck<Through<Via>> for &'a mut T
where
    T: DerefMut + ?Sized,
    &'a mut T::Target: RunsFenceCheck<Via>,
{
    fn run_fence_check(
        self,
        key: String,
        fence: i64,
    ) -> impl Future<Output = Result<bool, StatementError>> + Send {
        (&mut **self).run_fence_check(key, fence)
    }
}
