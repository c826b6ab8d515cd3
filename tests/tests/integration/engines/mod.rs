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
/// rule is `store/opening.rs`): the locker `a` of `builder` (whose connections go through
/// `proxy`) has calls bounded by 1 s and openings by 20 s; every connection of it is cut, and
/// the network comes back slow, each chunk held for 150 ms on its way (a round trip 300 ms or
/// more), so that opening a connection (a handshake, a login, the session's settings: many
/// round trips) takes longer than the operation timeout while a call (one or two round trips)
/// does not. Calls go out again within 20 tries: a call that stopped waiting for its
/// connection leaves it opening for the next one.
async fn calls_go_out_again_on_a_slow_network(
    proxy: &leasehold_tests::harness::TcpProxy,
    builder: leasehold::LockerBuilder,
) {
    use leasehold_tests::harness::ProxyMode;
    use std::time::Duration;
    let a = &builder
        .op_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(20))
        .build()
        .await
        .expect("a's locker");
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
