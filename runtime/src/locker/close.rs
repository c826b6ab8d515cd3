//! [`Locker::close`]: the end of a locker, for graceful shutdown.

use std::future::IntoFuture;
use std::time::Duration;

use crate::kernel::close::{CloseReport, DEFAULT_CLOSE_TIMEOUT};
use crate::locker::Locker;

impl Locker {
    /// Closes this locker, for a graceful shutdown: it refuses new calls from now on
    /// ([`LockError::Closed`](crate::LockError::Closed)), wakes the acquires that wait so that
    /// they end with that error, gives back every lease it holds (locks, readers' shares,
    /// semaphore permits, leaderships: followers see the leader go at once), and waits for
    /// the releases it sends and those running in the background (dropped guards) to end,
    /// for at most [`DEFAULT_CLOSE_TIMEOUT`] (5 s; see [`close_within`](Self::close_within)).
    /// Every clone of this locker is closed with it. Calling it again does no harm.
    ///
    /// Guards still alive lose their lease: `is_held()` is false, `lost()` resolves, and
    /// `release()` is [`LockError::Lost`](crate::LockError::Lost) with
    /// [`LostReason::Closed`](crate::LostReason::Closed). So close a locker once the work
    /// under its locks is done (after the web server stopped taking requests and drained
    /// them: see [`close_after`](Self::close_after)).
    ///
    /// Without `close`, a process that exits while it holds locks leaves them to the engine:
    /// they end when their lease runs out (Redis, PostgreSQL) or when the session does
    /// (ZooKeeper, etcd), and nobody gets them until then. Dropping the last handle of a
    /// locker does not close it: every guard keeps the locker alive, renews its lease and
    /// releases it when dropped; once the last guard is gone too, the locker's background
    /// task ends with it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker.lock("report").acquire().await?;
    /// let report = locker.close().await;
    /// assert_eq!((report.released, report.unconfirmed), (1, 0));
    /// assert!(!guard.is_held());
    /// let refused = locker.lock("report").acquire().await.unwrap_err();
    /// assert!(matches!(refused, leasehold::LockError::Closed));
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) -> CloseReport {
        self.close_within(DEFAULT_CLOSE_TIMEOUT).await
    }

    /// [`close`](Self::close), waiting at most `timeout` for the releases: those the engine
    /// did not confirm by then are counted in [`CloseReport::unconfirmed`] and end with their
    /// lease or session.
    pub async fn close_within(&self, timeout: Duration) -> CloseReport {
        self.inner.close(timeout).await
    }

    /// Whether [`close`](Self::close) was called on this locker (or a clone of it).
    pub fn is_closed(&self) -> bool {
        self.inner.closing.is_closed()
    }

    /// Runs `server` (a web server's future that ends after a graceful shutdown, e.g.
    /// actix-web's `HttpServer::run()` or axum's `serve(..).with_graceful_shutdown(..)`) and
    /// then closes this locker, so that the locks still held (by requests cut short, by a
    /// leader, by background jobs) are given back before the process exits instead of
    /// outliving it for a lease.
    ///
    /// With axum: `locker.close_after(axum::serve(listener, app).with_graceful_shutdown(signal))`;
    /// with actix-web: `locker.close_after(HttpServer::new(..).bind(..)?.run())` (actix-web
    /// stops gracefully on SIGTERM and Ctrl-C by itself). The example shops do this.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), leasehold::LockError> {
    /// let locker = leasehold::Locker::in_memory();
    /// let guard = locker.lock("nightly-report").acquire().await?;
    /// std::mem::forget(guard); // held by work the shutdown cut short
    /// let server = async { Ok::<(), std::io::Error>(()) }; // a server that shut down
    /// locker.close_after(server).await.unwrap();
    /// assert!(locker.is_closed());
    /// let other = locker.lock("nightly-report").try_acquire().await;
    /// assert!(matches!(other, Err(leasehold::LockError::Closed)));
    /// # Ok(()) }
    /// ```
    pub async fn close_after<S: IntoFuture>(&self, server: S) -> S::Output {
        let out = server.into_future().await;
        let report = self.close().await;
        tracing::info!(
            released = report.released,
            unconfirmed = report.unconfirmed,
            drained = report.drained,
            "the server stopped; the locker was closed"
        );
        out
    }
}
