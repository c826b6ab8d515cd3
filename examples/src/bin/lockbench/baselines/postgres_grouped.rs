//! The ceiling of issue 49's item 1 on PostgreSQL: the engine's own statements, with the
//! acquires (and the releases) of concurrent tasks put into one statement by hand, as a user
//! who wanted group commit and nothing else would write it. A task's request joins a queue; a
//! sender per kind takes everything queued (up to [`MAX_BATCH`]) and sends it as one
//! statement, `leasehold_acquire` (or `leasehold_release`) once per row of an `unnest` of the
//! batch's keys and owners, with up to [`CONNECTIONS`] statements of each kind on their way at
//! a time, the connections taken in turn (tokio-postgres pipelines statements that share one),
//! as the one-statement-per-call baseline takes its connections in turn.
//!
//! It keeps no fence, no wake-ups and no settling of calls whose outcome is unknown, and a
//! statement that fails panics the run: it is for free keys only (each task's own), and it
//! measures what one statement for many calls saves the server when the grouping itself costs
//! the client next to nothing. The library would pay for more (an attempt's own outcome inside
//! a shared statement, settling): if this does not beat one statement per call, nothing that
//! groups acquires on PostgreSQL does.

use std::sync::Arc;

use leasehold::postgres::statements::YIELD_WINDOW;
use leasehold::postgres::tokio_postgres as pg;
use tokio::sync::{mpsc, oneshot, Semaphore};

use super::postgres::PgConnection;
use super::{bounded, token};
use crate::key_lock::KeyLock;

/// The grouped baseline's rows in the report begin with this (their baseline is the same
/// statements sent one per call): `the same statements grouped by hand, cycles/s`.
pub(crate) const POSTGRES_GROUPED: &str = "the same statements grouped by hand";

/// The raw side's name in the line of waiters (it never waits in line).
const NAME: &str = "raw-grouped-0000";

/// Connections, as many as the one-statement-per-call baseline uses; also the most statements
/// of one kind on their way at a time.
const CONNECTIONS: usize = 4;

/// The most calls in one statement.
const MAX_BATCH: usize = 128;

/// Every row's `leasehold_acquire`, in the batch's order, for contenders that do not wait in
/// line, with the library's default lease and no fence reserved.
const ACQUIRE_MANY: &str = "SELECT a.fence \
     FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(key, owner, i), \
          LATERAL leasehold_acquire(k.key, k.owner, $3::bigint, 0, $4::text, 0, false) AS a \
     ORDER BY k.i";

/// Every row's `leasehold_release`, waking no one in particular (nobody waits).
const RELEASE_MANY: &str = "SELECT leasehold_release(k.key, k.owner, $3::text, $4::bigint, k.key) \
     FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(key, owner, i) \
     ORDER BY k.i";

/// One task's call: its key and owner token, and where its answer goes (the fence, for an
/// acquire).
struct Call {
    key: String,
    owner: String,
    answer: oneshot::Sender<Option<i64>>,
}

/// Which statement a sender sends.
#[derive(Clone, Copy)]
enum Kind {
    Acquire,
    Release,
}

/// One connection with the two statements prepared.
struct Conn {
    conn: PgConnection,
    acquire: pg::Statement,
    release: pg::Statement,
}

/// The grouped raw lock: a queue per kind of call, each drained by its sender.
#[derive(Clone)]
pub(crate) struct PostgresGrouped {
    acquires: mpsc::UnboundedSender<Call>,
    releases: mpsc::UnboundedSender<Call>,
}

impl PostgresGrouped {
    /// Connects; the lock table must exist (a leasehold locker on the same database made it).
    /// The senders stop when the last clone is dropped.
    pub(crate) async fn connect(url: &str) -> PostgresGrouped {
        let mut conns = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            let conn = PgConnection::open(url, None).await;
            let acquire = conn.client.prepare(ACQUIRE_MANY).await.expect("prepare");
            let release = conn.client.prepare(RELEASE_MANY).await.expect("prepare");
            conns.push(Conn {
                conn,
                acquire,
                release,
            });
        }
        let conns = Arc::new(conns);
        let (acquires, queued) = mpsc::unbounded_channel();
        tokio::spawn(sender(conns.clone(), queued, Kind::Acquire));
        let (releases, queued) = mpsc::unbounded_channel();
        tokio::spawn(sender(conns, queued, Kind::Release));
        PostgresGrouped { acquires, releases }
    }

    /// Queues a call of `kind` and waits for its answer.
    async fn call(&self, kind: Kind, key: &str, owner: &str) -> Option<i64> {
        let (answer, answered) = oneshot::channel();
        let queue = match kind {
            Kind::Acquire => &self.acquires,
            Kind::Release => &self.releases,
        };
        let call = Call {
            key: key.to_owned(),
            owner: owner.to_owned(),
            answer,
        };
        if queue.send(call).is_err() {
            panic!("the grouped baseline's sender stopped");
        }
        answered.await.expect("the sender answers")
    }
}

/// Sends what is queued, as one statement per batch, at most [`CONNECTIONS`] of `kind` on
/// their way at a time, the connections taken in turn.
async fn sender(conns: Arc<Vec<Conn>>, mut queued: mpsc::UnboundedReceiver<Call>, kind: Kind) {
    let free = Arc::new(Semaphore::new(conns.len()));
    let mut next = 0usize;
    // Wait for a free connection first, then take everything queued meanwhile.
    while let Ok(permit) = free.clone().acquire_owned().await {
        let Some(first) = queued.recv().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queued.try_recv() {
                Ok(call) => batch.push(call),
                Err(_) => break,
            }
        }
        let conns = conns.clone();
        let at = next % conns.len();
        next += 1;
        tokio::spawn(async move {
            send(&conns[at], kind, batch).await;
            drop(permit);
        });
    }
}

/// One statement for `batch`; each call answered with its row.
async fn send(conn: &Conn, kind: Kind, batch: Vec<Call>) {
    let client = &conn.conn.client;
    let keys: Vec<&str> = batch.iter().map(|c| c.key.as_str()).collect();
    let owners: Vec<&str> = batch.iter().map(|c| c.owner.as_str()).collect();
    let lease_ms = leasehold::DEFAULT_LEASE.as_millis() as i64;
    let window_ms = YIELD_WINDOW.as_millis() as i64;
    let rows = match kind {
        Kind::Acquire => {
            let params: [&(dyn pg::types::ToSql + Sync); 4] = [&keys, &owners, &lease_ms, &NAME];
            bounded("grouped acquires", client.query(&conn.acquire, &params)).await
        }
        Kind::Release => {
            let params: [&(dyn pg::types::ToSql + Sync); 4] = [&keys, &owners, &NAME, &window_ms];
            bounded("grouped releases", client.query(&conn.release, &params)).await
        }
    }
    .expect("a grouped statement");
    assert_eq!(rows.len(), batch.len(), "one row per call");
    for (call, row) in batch.into_iter().zip(rows) {
        let answer = match kind {
            Kind::Acquire => row.get::<_, Option<i64>>(0),
            Kind::Release => row.get::<_, Option<bool>>(0).map(i64::from),
        };
        let _ = call.answer.send(answer);
    }
}

/// Free keys only: an acquire that is not granted panics (nothing else holds a task's keys).
impl KeyLock for PostgresGrouped {
    type Held<'a> = String;

    async fn acquire<'a>(&'a self, key: &'a str) -> String {
        let owner = token();
        let fence = self.call(Kind::Acquire, key, &owner).await;
        assert!(
            fence.is_some(),
            "a free key was not granted to the grouped baseline"
        );
        owner
    }

    async fn release<'a>(&'a self, key: &'a str, owner: String) {
        let released = self.call(Kind::Release, key, &owner).await;
        assert!(
            released.is_some(),
            "the grouped baseline's release found another owner"
        );
    }
}
