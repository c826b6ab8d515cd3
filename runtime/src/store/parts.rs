//! The engine side of the two optional parts of [`Store`](super::Store): each engine states
//! the calls it has ([`LeaderParts`], [`AdminParts`]), and the one dispatch of a
//! [`LeaderOp`] or an [`AdminOp`] to them, with the answer named after the call, is written
//! here once ([`leader_by`], [`admin_by`]).

use super::identity::Identity;
use super::keys::LockKeys;
use super::token::OwnerToken;
use super::{
    answer, AdminAnswer, AdminOp, LeaderAnswer, LeaderOp, LeaderRecord, LockState, PermitState,
    StoreFuture,
};
use crate::error::LockError;

/// The calls on an election's leader records, one per [`LeaderOp`]. `record` names the
/// record where the engine keeps it under a key of its own; engines that keep it with the
/// lock do not use it.
pub(crate) trait LeaderParts {
    /// [`LeaderOp::Publish`]: `true` when written.
    fn leader_publish<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool>;

    /// [`LeaderOp::Clear`].
    fn leader_clear<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()>;

    /// [`LeaderOp::Read`].
    fn leader_read<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>>;
}

/// The operator's calls, one per [`AdminOp`]. The defaults refuse: the inspection calls as
/// an engine without inspection refuses them, a semaphore's holders as an engine whose
/// semaphores are answered elsewhere (a sequential-contender engine's recipe) refuses them.
pub(crate) trait AdminParts {
    /// [`AdminOp::Inspect`].
    fn admin_inspect<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, LockState> {
        let _ = keys;
        refused(no_inspection())
    }

    /// [`AdminOp::Permits`].
    fn admin_permits<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, PermitState> {
        let _ = keys;
        refused(LockError::config(
            "a semaphore's holders are inspected by the recipe, not the engine",
        ))
    }

    /// [`AdminOp::List`].
    fn admin_list<'a>(&'a self, prefix: &'a str) -> StoreFuture<'a, Vec<String>> {
        let _ = prefix;
        refused(no_inspection())
    }

    /// [`AdminOp::ForceRelease`]: `true` when there was a lock.
    fn admin_force_release<'a>(&'a self, keys: &'a LockKeys) -> StoreFuture<'a, bool> {
        let _ = keys;
        refused(no_inspection())
    }

    /// [`AdminOp::Describe`].
    fn admin_describe<'a>(
        &'a self,
        prefix: &'a str,
        identity: &'a Identity,
    ) -> StoreFuture<'a, ()> {
        let _ = (prefix, identity);
        refused(no_inspection())
    }
}

/// [`Store::leader`](super::Store::leader) of an engine with leader records: `op` to the
/// call of `parts` it names.
pub(crate) fn leader_by<'a, P: LeaderParts + ?Sized>(
    parts: &'a P,
    keys: &'a LockKeys,
    record: &'a str,
    op: LeaderOp<'a>,
) -> StoreFuture<'a, LeaderAnswer> {
    match op {
        LeaderOp::Publish { token, leader } => answer(
            parts.leader_publish(keys, record, token, leader),
            LeaderAnswer::Published,
        ),
        LeaderOp::Clear { term } => answer(parts.leader_clear(keys, record, term), |()| {
            LeaderAnswer::Cleared
        }),
        LeaderOp::Read => answer(parts.leader_read(keys, record), LeaderAnswer::Read),
    }
}

/// [`Store::admin`](super::Store::admin) of an engine with an operator's part: `op` to the
/// call of `parts` it names.
pub(crate) fn admin_by<'a, P: AdminParts + ?Sized>(
    parts: &'a P,
    op: AdminOp<'a>,
) -> StoreFuture<'a, AdminAnswer> {
    match op {
        AdminOp::Inspect(keys) => answer(parts.admin_inspect(keys), AdminAnswer::Lock),
        AdminOp::Permits(keys) => answer(parts.admin_permits(keys), AdminAnswer::Permits),
        AdminOp::List(prefix) => answer(parts.admin_list(prefix), AdminAnswer::Keys),
        AdminOp::ForceRelease(keys) => answer(parts.admin_force_release(keys), AdminAnswer::Forced),
        AdminOp::Describe { prefix, identity } => {
            answer(parts.admin_describe(prefix, identity), |()| {
                AdminAnswer::Described
            })
        }
    }
}

/// The refusal of an inspection call on an engine without inspection.
pub(crate) fn no_inspection() -> LockError {
    LockError::config("inspecting locks is not supported on this engine")
}

/// A call answered at once with `error`.
fn refused<'a, T: Send + 'a>(error: LockError) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(Err(error)))
}
