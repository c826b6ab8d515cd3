//! A PostgreSQL semaphore users write by hand with the engine's driver (tokio-postgres): a
//! table of permits (holder, expiry) and one row per semaphore that each attempt locks
//! (`FOR UPDATE`) to count the unexpired permits and add its own below the limit, in one
//! function call (one round trip, one transaction); on a full semaphore it polls every 1 ms,
//! as scenario 8's raw side (it has no wake-ups). Four connections, used in turn, as ours.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold::postgres::tokio_postgres as pg;

use crate::baselines::{token, PgConnection};
use crate::scenarios::permits::{Permits, PERMITS};

/// Its name in the report.
pub(crate) const POSTGRES_SEMAPHORE: &str =
    "permits table, one locked row per semaphore, count unexpired; 1 ms polling (tokio-postgres)";

const CONNECTIONS: usize = 4;

const LEASE_MS: i64 = 30_000;

const SETUP: &str = "
CREATE TABLE IF NOT EXISTS bench_raw_semaphores (name text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS bench_raw_permits
  (name text NOT NULL, holder text NOT NULL, expires timestamptz NOT NULL,
   PRIMARY KEY (name, holder));
CREATE OR REPLACE FUNCTION bench_raw_take_permit(sem text, who text, lim int, lease_ms bigint)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM bench_raw_semaphores WHERE name = sem FOR UPDATE;
  DELETE FROM bench_raw_permits WHERE name = sem AND expires < clock_timestamp();
  IF (SELECT count(*) FROM bench_raw_permits WHERE name = sem) < lim THEN
    INSERT INTO bench_raw_permits
      VALUES (sem, who, clock_timestamp() + lease_ms * interval '1 millisecond');
    RETURN true;
  END IF;
  RETURN false;
END $$;
";

const TAKE: &str = "SELECT bench_raw_take_permit($1, $2, $3, $4)";
const GIVE_BACK: &str = "DELETE FROM bench_raw_permits WHERE name = $1 AND holder = $2";

struct Conn {
    conn: PgConnection,
    take: pg::Statement,
    give_back: pg::Statement,
}

#[derive(Clone)]
pub(crate) struct PostgresPermits {
    conns: Arc<Vec<Conn>>,
    next: Arc<AtomicUsize>,
    name: String,
}

impl PostgresPermits {
    pub(crate) async fn connect(url: &str, name: &str) -> PostgresPermits {
        let mut conns = Vec::new();
        for _ in 0..CONNECTIONS {
            let conn = PgConnection::open(url, None).await;
            if conns.is_empty() {
                conn.client.batch_execute(SETUP).await.expect("setup");
                let add = "INSERT INTO bench_raw_semaphores VALUES ($1) ON CONFLICT DO NOTHING";
                conn.client
                    .execute(add, &[&name])
                    .await
                    .expect("semaphore row");
            }
            let take = conn.client.prepare(TAKE).await.expect("prepare");
            let give_back = conn.client.prepare(GIVE_BACK).await.expect("prepare");
            conns.push(Conn {
                conn,
                take,
                give_back,
            });
        }
        PostgresPermits {
            conns: Arc::new(conns),
            next: Arc::new(AtomicUsize::new(0)),
            name: name.to_owned(),
        }
    }

    fn conn(&self) -> &Conn {
        &self.conns[self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len()]
    }
}

impl Permits for PostgresPermits {
    /// The holder's token.
    type Permit = String;

    async fn acquire(&self) -> String {
        let holder = token();
        let limit = PERMITS as i32;
        loop {
            let c = self.conn();
            let row = c
                .conn
                .client
                .query_one(&c.take, &[&self.name, &holder, &limit, &LEASE_MS])
                .await
                .expect("take a permit");
            if row.get::<_, bool>(0) {
                return holder;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn release(&self, holder: String) {
        let c = self.conn();
        c.conn
            .client
            .execute(&c.give_back, &[&self.name, &holder])
            .await
            .expect("give the permit back");
    }
}
