//! What [`check_fence`](super::check_fence) and [`claim_fence`](super::claim_fence) run their
//! statement on: a connection of a driver they know (`tokio_pg`, `sqlx_pg`), reached directly
//! or through any number of `Deref`s, so a pool's connection or transaction needs no `&*`.
//!
//! One blanket impl per reference kind walks the `Deref`s, and the `Via` parameter (inferred,
//! never named by callers) records the path: impls that differ only in what a type derefs to
//! would overlap, since a driver's type may gain a `Deref` impl in a later version.

use std::future::Future;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use crate::error::BoxError;

/// SQLSTATE `undefined_function`: the transaction's database has no `leasehold_check_fence`.
pub(super) const UNDEFINED_FUNCTION: &str = "42883";

/// SQLSTATE `undefined_table`: the database has no `leasehold_claims`.
pub(super) const UNDEFINED_TABLE: &str = "42P01";

/// A driver's connection or transaction, taken as it is.
pub struct Direct;

/// A type that derefs, `Via` saying how its target reaches a connection.
pub struct Through<Via>(PhantomData<Via>);

/// A fence statement failed: the driver's error, as the driver tells it.
pub struct StatementError {
    /// The error and its causes, for messages.
    pub(super) text: String,
    /// The SQLSTATE the server answered, if it answered one.
    pub(super) sql_state: Option<String>,
    /// The driver's own error, kept as the source.
    pub(super) error: BoxError,
}

impl StatementError {
    pub(super) fn new(text: String, sql_state: Option<&str>, error: BoxError) -> Self {
        StatementError {
            text,
            sql_state: sql_state.map(str::to_owned),
            error,
        }
    }

    /// Whether the server answered this SQLSTATE.
    pub(super) fn is(&self, sql_state: &str) -> bool {
        self.sql_state.as_deref() == Some(sql_state)
    }
}

/// Runs a fence statement; implemented by each driver adapter for its connection types, and
/// below for references to whatever derefs to one.
pub trait RunsFenceCheck<Via>: Sized {
    /// Runs `statement` (`$1` a `text`, `$2` a `bigint`; one `boolean` back): what it
    /// answered, or why it failed.
    fn run_fence_check(
        self,
        statement: &'static str,
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
        statement: &'static str,
        key: String,
        fence: i64,
    ) -> impl Future<Output = Result<bool, StatementError>> + Send {
        (&**self).run_fence_check(statement, key, fence)
    }
}

impl<'a, T, Via> RunsFenceCheck<Through<Via>> for &'a mut T
where
    T: DerefMut + ?Sized,
    &'a mut T::Target: RunsFenceCheck<Via>,
{
    fn run_fence_check(
        self,
        statement: &'static str,
        key: String,
        fence: i64,
    ) -> impl Future<Output = Result<bool, StatementError>> + Send {
        (&mut **self).run_fence_check(statement, key, fence)
    }
}
