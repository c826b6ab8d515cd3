//! The MySQL engine against real MariaDB servers, beyond the conformance suite: the schema made
//! on first use (by lockers racing to make it, or by an operator for a user that may not),
//! the harness's least-privilege user, configuration errors, fences across crash restarts and
//! after a restore from an older dump, recovery from a crashed holder and a killed server, and a
//! guard's locks given back in one call.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::MysqlServer;

mod fences;
mod operator;
mod recovery;
mod releases;
mod setup;

fn builder(url: &str) -> leasehold::LockerBuilder {
    Locker::builder()
        .mysql(url)
        .prefix("myt")
        .op_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(10))
}

async fn locker(db: &MysqlServer) -> Locker {
    builder(&db.url()).build().await.expect("locker on MySQL")
}

/// The value of the first column of the first row `sql` gives, as text, run as root.
async fn scalar(db: &MysqlServer, sql: &str) -> String {
    let rows = db
        .execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter()
        .next()
        .and_then(|row| row.into_iter().next().flatten())
        .unwrap_or_else(|| panic!("{sql}: no value"))
}
