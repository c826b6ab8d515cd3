//! A backend as the server names it; the settlements of calls sent to one whose outcome is
//! unknown are the store's ([`crate::store::settling`]; see [`settle`](super::settle) for how a
//! connection is settled).

use tokio_postgres as pg;

pub(super) use crate::store::settling::{Settlement, Unsettled};

/// A backend as the server names it: process id and start time (µs since the epoch), so
/// that a pid reused by a later backend is never ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Backend {
    pub(super) pid: i32,
    pub(super) started: i64,
}

impl Backend {
    /// The backend named by the row of [`BACKEND`](super::sql::BACKEND) among `messages`.
    pub(super) fn of(messages: &[pg::SimpleQueryMessage]) -> Option<Backend> {
        messages.iter().find_map(|m| match m {
            pg::SimpleQueryMessage::Row(row) => Some(Backend {
                pid: row.get(0)?.parse().ok()?,
                started: row.get(1)?.parse().ok()?,
            }),
            _ => None,
        })
    }
}
