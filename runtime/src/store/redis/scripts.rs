//! The Lua scripts of the Redis engine and the shape of their replies.

use std::sync::LazyLock;
use std::time::Duration;

use crate::error::{Endpoint, LockError};

pub(super) static ACQUIRE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/fence.lua"),
        include_str!("lua/acquire_lone.lua"),
        include_str!("lua/owner.lua"),
        include_str!("lua/acquire.lua")
    ))
});
pub(super) static ACQUIRE_ALL: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/fence.lua"),
        include_str!("lua/acquire_all.lua")
    ))
});
pub(super) static RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/release_lone.lua"),
        include_str!("lua/clock.lua"),
        include_str!("lua/next_in_line.lua"),
        include_str!("lua/each.lua"),
        include_str!("lua/release.lua")
    ))
});
pub(super) static WITHDRAW: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/next_in_line.lua"),
        include_str!("lua/withdraw.lua")
    ))
});
pub(super) static READ_ACQUIRE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/fence.lua"),
        include_str!("lua/owner.lua"),
        include_str!("lua/read_acquire.lua")
    ))
});
pub(super) static READ_RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/next_in_line.lua"),
        include_str!("lua/read_release.lua")
    ))
});
pub(super) static READ_RENEW: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/each.lua"),
        include_str!("lua/read_renew.lua")
    ))
});
pub(super) static SEM_ACQUIRE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/fence.lua"),
        include_str!("lua/sem_acquire.lua")
    ))
});
pub(super) static SEM_RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/sem_release.lua")
    ))
});
pub(super) static SEM_WITHDRAW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("lua/sem_withdraw.lua")));
pub(super) static SEM_RENEW: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/each.lua"),
        include_str!("lua/sem_renew.lua")
    ))
});
pub(super) static SEM_INSPECT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/owner.lua"),
        include_str!("lua/sem_inspect.lua")
    ))
});
pub(super) static RENEW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("lua/renew.lua")));
pub(super) static RAISE_FENCE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("lua/raise_fence.lua")));
pub(super) static LEADER_PUBLISH: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("lua/leader_publish.lua")));
pub(super) static LEADER_READ: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("lua/leader_read.lua")));
pub(super) static LEADER_CLEAR: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("lua/leader_clear.lua")));
pub(super) static INSPECT: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(concat!(
        include_str!("lua/clock.lua"),
        include_str!("lua/owner.lua"),
        include_str!("lua/inspect.lua")
    ))
});
pub(super) static FORCE_RELEASE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("lua/force_release.lua")));

/// How long the next process in line has to take a lock that a release left to it (the key
/// holds its name meanwhile). Its waiter needs the wake-up and one round trip; a process that
/// stopped waiting without leaving the queue costs the other waiters this much, once.
pub(super) const YIELD_WINDOW: Duration = Duration::from_millis(200);

/// The longest a waiting process stays in the queue without asking again. Waiters ask again
/// at least every second (a wake-up, or `MAX_SLEEP` in acquire.rs).
pub(super) const MAX_INTEREST: Duration = Duration::from_secs(2);

/// How long the queue keys outlive their last use (more than any interest).
pub(super) const QUEUE_TTL: Duration = Duration::from_secs(6);

/// A reply of a lock script that does not have the documented shape.
pub(super) fn malformed(endpoint: &Endpoint, script: &str) -> LockError {
    LockError::unavailable(
        format!("redis at {endpoint} answered the {script} script with a malformed reply"),
        None,
    )
}

/// The error of one lock in a batched script: the server refused one of its commands (out
/// of memory, a key of the wrong type under the prefix). Only that lock's caller gets it.
pub(super) fn refused(endpoint: &Endpoint, script: &str, failure: &redis::Value) -> LockError {
    let detail = match failure {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    LockError::unavailable(
        format!(
            "redis at {endpoint} refused a command of the {script} script for this lock: \
             {detail} (is the server out of memory, or does another program write keys under \
             the lock prefix?)"
        ),
        None,
    )
}

/// A duration as whole milliseconds, at least one (Redis rejects a zero TTL).
pub(super) fn millis(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}
