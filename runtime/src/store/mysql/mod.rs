//! The MySQL and MariaDB engine: a lock is a row of a lease table, as on PostgreSQL. (Being
//! built: its design notes follow with the store.)

#![allow(dead_code)] // The skeleton: its parts are used as the store is built.

pub(crate) mod text;
#[cfg(feature = "tls")]
mod tls;
pub(crate) mod url;

use crate::error::LockError;
use crate::store::Settings;

pub(crate) use self::text::check_prefix;
pub(crate) use self::url::validate;

/// The tables and routines the engine uses, as an operator would apply them.
pub const SCHEMA: &str = "";

/// The MySQL engine's store.
pub(crate) struct MysqlStore {}

impl MysqlStore {
    /// Connects, creates the schema if it is missing, and starts the wake log's reader.
    pub(crate) async fn connect(url: &str, settings: &Settings) -> Result<Self, LockError> {
        let _ = (url::parse(url)?, settings);
        Err(LockError::config("the MySQL engine is not finished yet"))
    }
}

impl crate::store::Store for MysqlStore {
    fn info(&self) -> crate::store::Info {
        let mysql = crate::store::Engine::Mysql;
        crate::store::Info::of(
            mysql,
            mysql.capabilities(std::time::Duration::ZERO),
            "MySQL".to_owned(),
        )
    }

    fn acquire<'a>(
        &'a self,
        _req: &'a crate::store::AcquireRequest<'_>,
    ) -> crate::store::StoreFuture<'a, crate::store::Attempt> {
        unreachable!("never connected")
    }

    fn release<'a>(
        &'a self,
        _keys: &'a crate::store::keys::LockKeys,
        _token: &'a crate::store::token::OwnerToken,
        _kind: crate::store::kind::LeaseKind,
        _valid_until: tokio::time::Instant,
    ) -> crate::store::StoreFuture<'a, bool> {
        unreachable!("never connected")
    }

    fn renew<'a>(
        &'a self,
        _batch: &'a [crate::store::Renewal<'_>],
    ) -> crate::store::StoreFuture<'a, Vec<crate::store::Renewed>> {
        unreachable!("never connected")
    }

    fn subscribe<'a>(
        &'a self,
        _keys: &'a crate::store::keys::LockKeys,
    ) -> crate::store::StoreFuture<'a, crate::store::WakeSubscription> {
        unreachable!("never connected")
    }

    fn leader_records(&self) -> &dyn crate::store::LeaderRecords {
        unreachable!("never connected")
    }
}
