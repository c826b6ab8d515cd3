//! What [`check_fence`](super::check_fence) runs its statement on: a connection of a driver
//! it knows (`mysql_async_conn`, `sqlx_my`), reached directly or through any number of
//! `DerefMut`s, so a pool's connection needs no `&mut *`.
//!
//! As for PostgreSQL: one blanket impl walks the `Deref`s, and the `Via` parameter (inferred,
//! never named by callers) records the path, so that impls differing only in what a type
//! derefs to cannot overlap.

use std::future::Future;
use std::marker::PhantomData;
use std::ops::DerefMut;

use crate::error::BoxError;

/// MySQL's error numbers when the transaction's database has no leasehold schema: no such
/// procedure (`ER_SP_DOES_NOT_EXIST`, no `leasehold_check_fence`), no such table
/// (`ER_NO_SUCH_TABLE`), no database selected (`ER_NO_DB_ERROR`).
pub(super) const NO_SCHEMA: [u16; 3] = [1305, 1146, 1046];

/// MySQL's error number when the user may not run a routine (`ER_PROCACCESS_DENIED_ERROR`),
/// which the server also answers for a routine that does not exist where the user has no
/// `EXECUTE` at all.
pub(super) const NO_EXECUTE: u16 = 1370;

/// A driver's connection or transaction, taken as it is.
pub struct Direct;

/// A type that derefs, `Via` saying how its target reaches a connection.
pub struct Through<Via>(PhantomData<Via>);

/// The fence statement failed: the driver's error, as the driver tells it.
pub struct StatementError {
    /// The error and its causes, for messages.
    pub(super) text: String,
    /// The server's error number, if the server answered one.
    pub(super) code: Option<u16>,
    /// The driver's own error, kept as the source.
    pub(super) error: BoxError,
}

impl StatementError {
    pub(super) fn new(text: String, code: Option<u16>, error: BoxError) -> Self {
        StatementError { text, code, error }
    }
}

/// Runs the fence statement; implemented by each driver adapter for its connection types,
/// and below for `&mut` whatever derefs to one.
pub trait RunsFenceCheck<Via>: Sized {
    /// Runs `statement` (`?` the stored key as bytes, `?` the fence as a `BIGINT`; one row of
    /// one integer back, `NULL` or no row read as `None`): what it answered, or why it failed.
    fn run_fence_check(
        self,
        statement: &'static str,
        key: Vec<u8>,
        fence: i64,
    ) -> impl Future<Output = Result<Option<i64>, StatementError>> + Send;
}

impl<'a, T, Via> RunsFenceCheck<Through<Via>> for &'a mut T
where
    T: DerefMut + ?Sized,
    &'a mut T::Target: RunsFenceCheck<Via>,
{
    fn run_fence_check(
        self,
        statement: &'static str,
        key: Vec<u8>,
        fence: i64,
    ) -> impl Future<Output = Result<Option<i64>, StatementError>> + Send {
        (&mut **self).run_fence_check(statement, key, fence)
    }
}
