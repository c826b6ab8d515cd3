//! The PostgreSQL election users write by hand with the engine's driver (tokio-postgres):
//! each candidate blocks in `pg_advisory_lock` on a connection of its own (the server queues
//! the waiters and frees the lock when the holder unlocks or its session ends), then records
//! itself in a row with a term from a sequence and `NOTIFY`s; the observer `LISTEN`s and
//! reads the row (and re-reads every second, should a notification be missed).

use std::time::Duration;

use leasehold::postgres::tokio_postgres as pg;
use tokio::sync::{mpsc, Mutex};

use crate::baselines::PgConnection;
use crate::scenarios::leader::handover::Election;

/// Its name in the report.
pub(crate) const POSTGRES_ELECTION: &str =
    "pg_advisory_lock + record row, LISTEN/NOTIFY observer (tokio-postgres)";

const SETUP: &str = "CREATE TABLE IF NOT EXISTS bench_raw_leader \
     (name text PRIMARY KEY, term bigint NOT NULL, identity text NOT NULL); \
     CREATE SEQUENCE IF NOT EXISTS bench_raw_leader_term";

const LOCK: &str = "SELECT pg_advisory_lock(hashtextextended($1, 0))";

const RECORD: &str = "WITH r AS (\
     INSERT INTO bench_raw_leader VALUES ($1, nextval('bench_raw_leader_term'), $2) \
     ON CONFLICT (name) DO UPDATE SET term = EXCLUDED.term, identity = EXCLUDED.identity \
     RETURNING term) \
     SELECT term, pg_notify('bench_raw_leader', $1) IS NULL FROM r";

const RESIGN: &str = "WITH gone AS (DELETE FROM bench_raw_leader WHERE name = $1 AND term = $2) \
     SELECT pg_advisory_unlock(hashtextextended($1, 0)), \
     pg_notify('bench_raw_leader', $1) IS NULL";

const READ: &str = "SELECT term FROM bench_raw_leader WHERE name = $1";

/// The observer's re-read when no notification came.
const RECHECK: Duration = Duration::from_secs(1);

/// The election `name` on the server at `url`.
pub(crate) struct PostgresElection {
    url: String,
    name: String,
}

/// A candidate's connection with its statements prepared.
pub(crate) struct Candidate {
    conn: PgConnection,
    lock: pg::Statement,
    record: pg::Statement,
    resign: pg::Statement,
}

/// The observer's listening connection.
pub(crate) struct Observer {
    conn: PgConnection,
    read: pg::Statement,
    notices: Mutex<mpsc::UnboundedReceiver<()>>,
}

impl PostgresElection {
    /// Makes the record table and the term sequence.
    pub(crate) async fn prepare(url: &str) {
        let conn = PgConnection::open(url, None).await;
        conn.client.batch_execute(SETUP).await.expect("setup");
    }

    pub(crate) fn new(url: &str, name: String) -> PostgresElection {
        PostgresElection {
            url: url.to_owned(),
            name,
        }
    }
}

impl Election for PostgresElection {
    type Candidate = Candidate;
    /// The term.
    type Leadership = i64;
    type Observer = Observer;

    async fn candidate(&self) -> Candidate {
        let conn = PgConnection::open(&self.url, None).await;
        let prepare = |sql| conn.client.prepare(sql);
        let (lock, record, resign) = (prepare(LOCK), prepare(RECORD), prepare(RESIGN));
        let (lock, record, resign) = (
            lock.await.expect("prepare"),
            record.await.expect("prepare"),
            resign.await.expect("prepare"),
        );
        Candidate {
            conn,
            lock,
            record,
            resign,
        }
    }

    async fn campaign<'a>(&'a self, candidate: &'a Candidate, identity: &'a str) -> (i64, u64) {
        let client = &candidate.conn.client;
        client
            .execute(&candidate.lock, &[&self.name])
            .await
            .expect("advisory lock");
        let row = client
            .query_one(&candidate.record, &[&self.name, &identity])
            .await
            .expect("record");
        let term: i64 = row.get(0);
        (term, term as u64)
    }

    async fn resign<'a>(&'a self, candidate: &'a Candidate, term: i64) {
        let client = &candidate.conn.client;
        client
            .execute(&candidate.resign, &[&self.name, &term])
            .await
            .expect("resign");
    }

    /// The connection closed: the server frees the advisory lock when the session ends; the
    /// record stays until the next leader overwrites it.
    async fn end_session(&self, candidate: Candidate, _: i64) {
        drop(candidate);
    }

    async fn observer(&self) -> Observer {
        let (tx, notices) = mpsc::unbounded_channel();
        let conn = PgConnection::open(&self.url, Some(tx)).await;
        conn.client
            .batch_execute("LISTEN bench_raw_leader")
            .await
            .expect("listen");
        let read = conn.client.prepare(READ).await.expect("prepare");
        Observer {
            conn,
            read,
            notices: Mutex::new(notices),
        }
    }

    async fn next_leader<'a>(&'a self, observer: &'a mut Observer, last: u64) -> u64 {
        let mut notices = observer.notices.lock().await;
        loop {
            while notices.try_recv().is_ok() {}
            let row = observer
                .conn
                .client
                .query_opt(&observer.read, &[&self.name])
                .await
                .expect("read the record");
            if let Some(term) = row.map(|r| r.get::<_, i64>(0) as u64) {
                if term != last {
                    return term;
                }
            }
            let _ = tokio::time::timeout(RECHECK, notices.recv()).await;
        }
    }
}
