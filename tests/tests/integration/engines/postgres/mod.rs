//! The PostgreSQL engine against real servers, beyond the conformance suite: the schema made
//! on first use (by lockers racing to make it, or by an operator for a user that may not),
//! fenced writes in the caller's own transaction (a stale holder's write refused, also from a
//! serializable transaction racing the takeover), fences across crash restarts, rows of
//! crashed holders taken over and swept, and configuration errors.

use std::time::Duration;

use leasehold::postgres::tokio_postgres::{self as pg, NoTls};
use leasehold::Locker;
use leasehold_tests::harness::PgServer;

mod fenced;
mod fences;
mod line;
mod recovery;
mod setup;

/// Calls bounded by 5 s and the set-up (connecting, making the schema) by 10 s: no test here
/// waits one out, and at 2 s each a locker's set-up missed its bound on a machine whose two
/// cores were also busy with other work.
fn builder(url: &str) -> leasehold::LockerBuilder {
    Locker::builder()
        .postgres(url)
        .prefix("pgt")
        .op_timeout(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(10))
}

async fn locker(pg: &PgServer) -> Locker {
    builder(&pg.url())
        .build()
        .await
        .expect("locker on PostgreSQL")
}

/// A client of the test's own, as the user's application would have.
async fn client(url: &str) -> pg::Client {
    let (client, connection) = pg::connect(url, NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

async fn count(client: &pg::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.expect(sql).get(0)
}
