//! The Redis ACL that the README documents is enough for every command, and no more.

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;

use crate::{run, within};

/// The ACL that cli/README.md documents for prefix `leasehold`.
const ACL: &[&str] = &[
    "resetkeys",
    "resetchannels",
    "-@all",
    "~leasehold:*",
    "&leasehold:wake:*",
    "+scan",
    "+evalsha",
    "+script|load",
    "+get",
    "+pttl",
    "+zcard",
    "+zrange",
    "+zrangebyscore",
    "+time",
    "+del",
    "+publish",
    "+info|memory",
];

#[tokio::test]
async fn the_documented_acl_is_enough() {
    within(async {
        let srv = RedisServer::start().await;
        let app = Locker::connect(&srv.url()).await.unwrap();
        let held = app.lock("stock:sku-7").acquire().await.unwrap();
        let mut admin = srv.conn().await;
        let mut setuser = redis::cmd("ACL");
        setuser.arg("SETUSER").arg("ops").arg("on").arg(">ops-pw");
        for rule in ACL {
            setuser.arg(*rule);
        }
        let () = setuser.query_async(&mut admin).await.unwrap();
        let () = redis::cmd("ACL")
            .arg("LOG")
            .arg("RESET")
            .query_async(&mut admin)
            .await
            .unwrap();
        let url = format!("redis://ops:ops-pw@{}", srv.addr());

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("stock:sku-7"), "{out:#?}");
        run(&["show", "stock:sku-7", "--url", &url], None)
            .await
            .assert_code(0);
        run(
            &["watch", "stock:sku-7", "--for", "300ms", "--url", &url],
            None,
        )
        .await
        .assert_code(0);
        run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await
        .assert_code(0);
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);

        let log: Vec<redis::Value> = redis::cmd("ACL")
            .arg("LOG")
            .query_async(&mut admin)
            .await
            .unwrap();
        assert!(log.is_empty(), "ACL denials: {log:?}");
        // And the user cannot touch other data.
        let out = run(&["show", "k", "--url", &url, "--prefix", "other"], None).await;
        out.assert_code(3);
        assert!(out.stderr.contains("lacks a permission"), "{out:#?}");
        drop(held);
    })
    .await;
}
