//! Renewals in batches, for the engines that renew a batch in one statement (PostgreSQL,
//! MySQL): when the server refuses the statement, each half is renewed on its own, down to
//! single leases, so that one lease that cannot be renewed now never fails the others.

use std::future::Future;
use std::pin::Pin;

use crate::error::LockError;
use crate::store::{Renewal, Renewed};

type Halves<'f> = Pin<Box<dyn Future<Output = Result<Vec<Renewed>, LockError>> + Send + 'f>>;

/// Renews `batch` with `once` (one statement for the whole batch). When the server refuses
/// that statement (`refused`: an answer about one of its leases, a row waited on too long),
/// each half is renewed on its own, down to single leases, and a single lease refused reads
/// [`Renewed::Unknown`] (the watchdog retries it). A connection that failed or timed out
/// (any other error) still fails the whole batch: every lease on it is as much in doubt.
pub(crate) async fn renew_halving<'a, F, Fut>(
    batch: &'a [Renewal<'a>],
    once: F,
    refused: fn(&LockError) -> bool,
) -> Result<Vec<Renewed>, LockError>
where
    F: Fn(&'a [Renewal<'a>]) -> Fut + Sync,
    Fut: Future<Output = Result<Vec<Renewed>, LockError>> + Send + 'a,
{
    halve(batch, &once, refused).await
}

fn halve<'a: 'f, 'f, F, Fut>(
    batch: &'a [Renewal<'a>],
    once: &'f F,
    refused: fn(&LockError) -> bool,
) -> Halves<'f>
where
    F: Fn(&'a [Renewal<'a>]) -> Fut + Sync,
    Fut: Future<Output = Result<Vec<Renewed>, LockError>> + Send + 'a,
{
    Box::pin(async move {
        match once(batch).await {
            Err(e) if refused(&e) => {
                if batch.len() == 1 {
                    return Ok(vec![Renewed::Unknown]);
                }
                let (first, second) = batch.split_at(batch.len() / 2);
                let mut out = halve(first, once, refused).await?;
                out.extend(halve(second, once, refused).await?);
                Ok(out)
            }
            other => other,
        }
    })
}
