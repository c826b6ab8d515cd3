//! Leader records: the elected leader's term and identity in `leasehold_leaders`, beside the
//! election's lock, believed only while its owner token holds that lock on the server's clock
//! (`leasehold_publish_leader` in `schema.sql`, and the read joined with `leasehold_locks`).

use tokio_postgres as pg;

use super::sql::{CLEAR_LEADER, PUBLISH_LEADER, READ_LEADER};
use super::text::{db_text, token_text};
use super::PostgresStore;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{LeaderParts, LeaderRecord, StoreFuture};

impl LeaderParts for PostgresStore {
    fn leader_publish<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        token: &'a OwnerToken,
        leader: &'a LeaderRecord,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = db_text(keys.lock()).into_owned();
            let record = db_text(record).into_owned();
            let wake = db_text(keys.wake()).into_owned();
            let owner = token_text(token);
            let term = i64::try_from(leader.term).unwrap_or(i64::MAX);
            let identity = leader.identity.as_str();
            let params: [&(dyn pg::types::ToSql + Sync); 6] =
                [&key, &record, &owner, &term, &identity, &wake];
            let rows = self
                .query("refused a leader record", PUBLISH_LEADER, &params)
                .await?;
            Ok(rows.first().is_some_and(|row| row.get::<_, i32>(0) == 1))
        })
    }

    fn leader_clear<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
        term: u64,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let record = db_text(record).into_owned();
            let wake = db_text(keys.wake()).into_owned();
            let term = i64::try_from(term).unwrap_or(i64::MAX);
            self.query(
                "refused to clear a leader record",
                CLEAR_LEADER,
                &[&record, &term, &wake],
            )
            .await?;
            Ok(())
        })
    }

    fn leader_read<'a>(
        &'a self,
        keys: &'a LockKeys,
        record: &'a str,
    ) -> StoreFuture<'a, Option<LeaderRecord>> {
        Box::pin(async move {
            let key = db_text(keys.lock()).into_owned();
            let record = db_text(record).into_owned();
            let rows = self
                .query(
                    "refused a read of a leader record",
                    READ_LEADER,
                    &[&record, &key],
                )
                .await?;
            Ok(rows.first().map(|row| LeaderRecord {
                term: row.get::<_, i64>(0).max(0) as u64,
                identity: row.get(1),
            }))
        })
    }
}
