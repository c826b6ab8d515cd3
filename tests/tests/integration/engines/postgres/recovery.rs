//! What a crash or a lost answer leaves behind: rows of crashed holders taken over and swept,
//! and a release whose answer was lost, sent again, not reported lost.

use std::time::Duration;

use leasehold_tests::harness::{eventually, PgServer};
use tokio::time::Instant;

use super::{builder, client, count, locker};

/// Rows a crashed holder left are taken over at once once expired, and swept by lockers, so
/// the table stays about as large as the set of held locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_crashed_holders_are_taken_over_and_swept() {
    let pg = PgServer::start().await;
    let first = locker(&pg).await;
    let db = client(&pg.url()).await;
    db.batch_execute(
        "INSERT INTO leasehold_locks (key, owner, fence, expires) \
         SELECT 'pgt:lock:{dead' || i || '}', 'gone', i, now() - interval '1 minute' \
         FROM generate_series(1, 500) AS i",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let guard = first
        .lock("dead7")
        .wait(Duration::ZERO)
        .acquire()
        .await
        .expect("an expired row is taken over at once");
    assert!(started.elapsed() < Duration::from_secs(1));
    // A locker sweeps when it starts, then every half minute.
    let _second = locker(&pg).await;
    eventually(
        "expired rows are swept",
        Duration::from_secs(10),
        || async {
            count(
                &db,
                "SELECT count(*) FROM leasehold_locks WHERE expires < now()",
            )
            .await
                == 0
        },
    )
    .await;
    assert_eq!(
        count(&db, "SELECT count(*) FROM leasehold_locks").await,
        1,
        "only the held lock's row stays"
    );
    guard.release().await.unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM leasehold_locks").await, 0);
}

/// The connection of a release breaks after the server deleted the lock but before its answer
/// came back; the engine sends the release again on a new connection, which finds nothing to
/// delete. The lock was held to the end and given back: the release must succeed, not report
/// the lock lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_answer_was_lost_is_not_reported_lost() {
    let pg = PgServer::start().await;
    let proxy = ReplyDropper::start(pg.addr()).await;
    let a = builder(&format!("postgres://postgres@{}/postgres", proxy.addr))
        .op_timeout(Duration::from_secs(2))
        .build()
        .await
        .unwrap();
    let b = locker(&pg).await;
    let guard = a
        .lock("answer")
        .lease(Duration::from_secs(30))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    // The next message naming the lock is the release: the server gets it, its answer is lost.
    proxy.arm(b"pgt:lock:{answer}");
    let released = guard.release().await;
    assert!(
        proxy.fired(),
        "the release's answer was never dropped: the test did not test"
    );
    assert!(
        released.is_ok(),
        "a release that took effect, retried after its answer was lost: {released:?}"
    );
    let next = b
        .lock("answer")
        .try_acquire()
        .await
        .unwrap()
        .expect("the lock is free");
    next.release().await.unwrap();
}

/// A TCP proxy in front of PostgreSQL that forwards everything, except that once armed with a
/// marker, the connection whose client sends the marker next gets its request through to the
/// server and is then closed instead of receiving the answer: a statement that took effect
/// while its answer was lost.
struct ReplyDropper {
    addr: std::net::SocketAddr,
    armed: std::sync::Arc<std::sync::Mutex<Option<Vec<u8>>>>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for ReplyDropper {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl ReplyDropper {
    async fn start(target: std::net::SocketAddr) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let armed: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
        let fired = Arc::new(AtomicBool::new(false));
        let (armed2, fired2) = (armed.clone(), fired.clone());
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                    continue;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                let doomed = Arc::new(AtomicBool::new(false));
                let (armed, fired, doomed2) = (armed2.clone(), fired2.clone(), doomed.clone());
                let up = tokio::spawn(async move {
                    let mut buf = vec![0; 64 * 1024];
                    while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                        let chunk = &buf[..n];
                        {
                            let mut armed = armed.lock().unwrap();
                            let hit = armed
                                .as_ref()
                                .is_some_and(|m| chunk.windows(m.len()).any(|w| w == m));
                            if hit {
                                // Doomed before the server can answer.
                                *armed = None;
                                doomed2.store(true, Ordering::SeqCst);
                            }
                        }
                        if to_server.write_all(chunk).await.is_err() {
                            return;
                        }
                    }
                });
                tokio::spawn(async move {
                    let mut buf = vec![0; 64 * 1024];
                    while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                        if doomed.load(Ordering::SeqCst) {
                            fired.store(true, Ordering::SeqCst);
                            break;
                        }
                        if to_client.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    // Both directions closed: the client sees its connection end.
                    up.abort();
                });
            }
        });
        ReplyDropper {
            addr,
            armed,
            fired,
            accepting,
        }
    }

    fn arm(&self, marker: &[u8]) {
        *self.armed.lock().unwrap() = Some(marker.to_vec());
    }

    fn fired(&self) -> bool {
        self.fired.load(std::sync::atomic::Ordering::SeqCst)
    }
}
