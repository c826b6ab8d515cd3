//! The same commands on ZooKeeper, etcd, PostgreSQL and MySQL.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::{EtcdServer, MysqlServer, PgServer, ZkServer};

use crate::{field, run, within};

/// The same operations on a ZooKeeper ensemble, named as `zookeeper://host:port,...`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_release_work_on_zookeeper() {
    within(async {
        let zk = ZkServer::start().await;
        let url = format!("zookeeper://{}", zk.connect_string());
        let app = Locker::builder()
            .zookeeper(zk.connect_string())
            .session_timeout(Duration::from_secs(4))
            .build()
            .await
            .unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "a header and one row: {out:#?}");
        assert_eq!(rows[1][0], "stock:sku-7", "{out:#?}");
        // The hold lasts as long as the session: one word, the table splits on spaces.
        assert_eq!(rows[1][1], "session", "{out:#?}");

        let out = run(&["show", "stock:sku-7", "--url", &url], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");
        assert_eq!(field(&out, "remaining"), "session", "{out:#?}");

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(6), held.lost())
            .await
            .expect("the holder finds out at its next renewal");

        // Nothing held: an answer that names the engine, never as Redis.
        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(
            out.stderr.contains(&format!(
                "(prefix \"leasehold\", zookeeper {})",
                zk.connect_string()
            )),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");
    })
    .await;
}

/// The same operations on an etcd cluster, named as `etcd://host:port,...` or, for `show`, by
/// `etcd = [...]` in the config file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_release_work_on_etcd() {
    within(async {
        let etcd = EtcdServer::start().await;
        let url = format!("etcd://{}", etcd.addr());
        let app = Locker::builder()
            .etcd([etcd.endpoint()])
            .session_timeout(Duration::from_secs(3))
            .build()
            .await
            .unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "a header and one row: {out:#?}");
        assert_eq!(rows[1][0], "stock:sku-7", "{out:#?}");
        // The hold lasts as long as the session: one word, the table splits on spaces.
        assert_eq!(rows[1][1], "session", "{out:#?}");

        let config = etcd.dir().join("leasehold-cli.toml");
        std::fs::write(&config, format!("etcd = [\"{}\"]\n", etcd.endpoint())).unwrap();
        let config = config.to_str().unwrap();
        let out = run(&["show", "stock:sku-7", "--config", config], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");
        assert_eq!(field(&out, "remaining"), "session", "{out:#?}");

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(5), held.lost())
            .await
            .expect("the holder finds out at its next renewal");

        // Nothing held: an answer that names the engine, never as Redis.
        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(
            out.stderr
                .contains(&format!("(prefix \"leasehold\", etcd {})", etcd.addr())),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");
    })
    .await;
}

/// The same operations on PostgreSQL, named by its URL or, for `show`, by `postgres = "..."`
/// in the config file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_release_work_on_postgres() {
    within(async {
        let pg = PgServer::start().await;
        let url = pg.url();
        let app = Locker::builder()
            .postgres(url.as_str())
            .default_lease(Duration::from_secs(3))
            .build()
            .await
            .unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "a header and one row: {out:#?}");
        assert_eq!(rows[1][0], "stock:sku-7", "{out:#?}");

        let config = pg.dir().join("leasehold-cli.toml");
        std::fs::write(&config, format!("postgres = \"{url}\"\n")).unwrap();
        let config = config.to_str().unwrap();
        let out = run(&["show", "stock:sku-7", "--config", config], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(5), held.lost())
            .await
            .expect("the holder finds out at its next renewal");

        // Nothing held: an answer that names the engine, never as Redis.
        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(
            out.stderr
                .contains(&format!("(prefix \"leasehold\", postgres {})", pg.addr())),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");

        // An unreachable database: exit 3, a message naming it, no password.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let gone = format!("postgres://postgres:s3cret@127.0.0.1:{port}/postgres");
        let out = run(&["list", "--url", &gone], None).await;
        out.assert_code(3);
        assert!(!out.stderr.contains("s3cret"), "{out:#?}");
        assert!(
            out.stderr.contains(&format!("127.0.0.1:{port}")),
            "{out:#?}"
        );
        assert!(
            out.stderr.starts_with("error: cannot reach PostgreSQL at ")
                && out.stderr.contains(": could not be reached"),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");
    })
    .await;
}

/// The same operations on MySQL (MariaDB), named by its URL or, for `show`, by
/// `mysql = "..."` in the config file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_and_release_work_on_mysql() {
    within(async {
        let db = MysqlServer::start().await;
        let url = db.url();
        let app = Locker::builder()
            .mysql(url.as_str())
            .default_lease(Duration::from_secs(3))
            .build()
            .await
            .unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 2, "a header and one row: {out:#?}");
        assert_eq!(rows[1][0], "stock:sku-7", "{out:#?}");

        let config = db.dir().join("leasehold-cli.toml");
        std::fs::write(&config, format!("mysql = \"{url}\"\n")).unwrap();
        let config = config.to_str().unwrap();
        let out = run(&["show", "stock:sku-7", "--config", config], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(5), held.lost())
            .await
            .expect("the holder finds out at its next renewal");

        // Nothing held: an answer that names the engine, never as Redis.
        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(
            out.stderr
                .contains(&format!("(prefix \"leasehold\", mysql {})", db.addr())),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");

        // An unreachable database: exit 3, a message naming it, no password.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let gone = format!("mysql://locks:s3cret@127.0.0.1:{port}/shop");
        let out = run(&["list", "--url", &gone], None).await;
        out.assert_code(3);
        assert!(!out.stderr.contains("s3cret"), "{out:#?}");
        assert!(
            out.stderr.contains(&format!("127.0.0.1:{port}")),
            "{out:#?}"
        );
        assert!(
            out.stderr.starts_with("error: cannot reach MySQL at "),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("redis"), "{out:#?}");
    })
    .await;
}
