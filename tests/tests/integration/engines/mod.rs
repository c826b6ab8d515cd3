//! What each engine does beyond the conformance suite (`store/` of the runtime), and starting
//! without one (`lazy_connect`).

mod at_once;
mod at_once_redlock;
mod at_once_sql;
mod consensus;
mod etcd;
mod fence_migration;
mod lazy_connect;
mod memory;
mod mysql;
mod mysql_fenced;
mod mysql_tls;
mod mysql_unknown;
mod postgres;
mod postgres_parts;
mod postgres_tls;
mod postgres_unknown;
mod redis;
mod turns;
mod zookeeper;
mod zookeeper_auth;

/// The SQL engines' pools after an outage (`postgres_unknown.rs`, `mysql_unknown.rs`; the
/// rule is `store/opening.rs`): every connection of `a` through `proxy` is cut, and the
/// network comes back slow, each chunk held for 150 ms on its way (a round trip 300 ms or
/// more), so that opening a connection (a handshake, a login, the session's settings: many
/// round trips) takes longer than `a`'s operation timeout (1 s) while a call (one or two round
/// trips) does not. Calls go out again within 20 tries: a call that stopped waiting for its
/// connection leaves it opening for the next one.
async fn calls_go_out_again_on_a_slow_network(
    proxy: &leasehold_tests::harness::TcpProxy,
    a: &leasehold::Locker,
) {
    use leasehold_tests::harness::ProxyMode;
    use std::time::Duration;
    let warm = a.lock("warm").acquire().await.expect("a free lock");
    warm.release().await.expect("released");
    proxy.set_mode(ProxyMode::Cut);
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.set_mode(ProxyMode::Delay(Duration::from_millis(150)));
    let mut failed = Vec::new();
    let guard = loop {
        match a.lock(format!("k{}", failed.len())).try_acquire().await {
            Ok(guard) => break guard,
            Err(e) => failed.push(e.to_string()),
        }
        assert!(
            failed.len() < 20,
            "no call went out again in 20 tries: {failed:#?}"
        );
    };
    guard
        .expect("a free lock")
        .release()
        .await
        .expect("released");
}
