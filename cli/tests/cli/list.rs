//! `list` and `show`: held locks as a table, who holds and who waits, a semaphore's holders,
//! and held told from free.

use std::time::Duration;

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;

use crate::{app, field, hold, owner_token, run, within};

#[tokio::test]
async fn list_shows_held_locks_as_a_table() {
    within(async {
        let (srv, url, app) = app().await;
        let a = hold(&app, "stock:sku-7", Duration::from_secs(10)).await;
        let b = hold(&app, "stock:sku-8", Duration::from_secs(20)).await;
        let c = app.lock("order:1").acquire().await.unwrap();
        c.release().await.unwrap();
        // Someone waits for sku-8.
        let waiter = Locker::connect(&url).await.unwrap();
        let waiting = tokio::spawn(async move {
            let _ = waiter
                .lock("stock:sku-8")
                .wait(Duration::from_secs(5))
                .acquire()
                .await;
        });
        tokio::time::sleep(Duration::from_millis(200)).await;

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let rows: Vec<Vec<&str>> = out
            .stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows.len(), 3, "a header and two rows: {out:#?}");
        assert_eq!(
            rows[0],
            ["KEY", "REMAINING", "FENCE", "WAITERS", "LABEL", "HOLDER"]
        );
        assert_eq!(rows[1][0], "stock:sku-7");
        assert_eq!(rows[2][0], "stock:sku-8");
        let remaining: f64 = rows[1][1].strip_suffix('s').unwrap().parse().unwrap();
        assert!((8.0..=10.0).contains(&remaining), "{out:#?}");
        let remaining: f64 = rows[2][1].strip_suffix('s').unwrap().parse().unwrap();
        assert!((18.0..=20.0).contains(&remaining), "{out:#?}");
        assert_eq!(rows[1][2], a.fence().to_string());
        assert_eq!(rows[2][2], b.fence().to_string());
        assert_eq!((rows[1][3], rows[2][3]), ("no", "yes"));
        for key in ["stock:sku-7", "stock:sku-8"] {
            let token = owner_token(&srv, key).await;
            let token = token.trim_end_matches('+');
            assert!(
                !out.stdout.contains(token) && !out.stderr.contains(token),
                "an owner token was printed: {out:#?}"
            );
        }

        // A pattern; and no match is an answer, with stdout left empty.
        let out = run(&["list", "stock:*-7", "--url", &url], None).await;
        out.assert_code(0);
        assert_eq!(out.stdout.lines().count(), 2, "{out:#?}");
        let out = run(&["--url", &url, "list", "order:*"], None).await;
        out.assert_code(0);
        assert_eq!(out.stdout, "", "{out:#?}");
        assert!(
            out.stderr.contains(&format!(
                "no held locks match \"order:*\" (prefix \"leasehold\", redis {})",
                srv.addr()
            )),
            "{out:#?}"
        );

        waiting.abort();
        a.release().await.unwrap();
        b.release().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn show_and_list_tell_who_holds_and_who_waits() {
    within(async {
        let srv = RedisServer::start().await;
        let url = srv.url();
        let named = |service: &'static str| {
            let url = url.clone();
            async move {
                Locker::builder()
                    .url(url)
                    .service_name(service)
                    .build()
                    .await
                    .unwrap()
            }
        };
        let app = named("checkout").await;
        let other = named("billing").await;
        let guard = app
            .lock("order:42")
            .label("req-7f3a")
            .lease(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        let waiting = tokio::spawn(async move {
            let _ = other
                .lock("order:42")
                .wait(Duration::from_secs(5))
                .acquire()
                .await;
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let d = app.description();
        let who = format!("checkout@{} pid {}", d.host, d.pid);

        let out = run(&["show", "order:42", "--url", &url], None).await;
        out.assert_code(0);
        let line = |name: &str| -> String {
            out.stdout
                .lines()
                .find(|l| l.starts_with(&format!("{name}:")))
                .unwrap_or_else(|| panic!("no {name} line: {out:#?}"))[name.len() + 1..]
                .trim()
                .to_owned()
        };
        assert_eq!(line("holder"), who, "{out:#?}");
        assert!(line("  locker").starts_with(&format!("locker {}, leasehold ", d.locker)));
        assert!(line("  since").ends_with(" ago)"), "{out:#?}");
        assert_eq!(line("  label"), "req-7f3a");
        let waiter = line("waiter");
        assert!(
            waiter.starts_with(&format!("billing@{} pid {}, waiting ", d.host, d.pid)),
            "{out:#?}"
        );
        let token = owner_token(&srv, "order:42").await;
        let secret = &token.trim_end_matches('+')[token.trim_end_matches('+').len() - 32..];
        assert!(
            !out.stdout.contains(secret),
            "a token was printed: {out:#?}"
        );

        let out = run(&["list", "--url", &url], None).await;
        out.assert_code(0);
        let row = out.stdout.lines().nth(1).expect("a row");
        assert!(row.contains("req-7f3a"), "{out:#?}");
        assert!(row.ends_with(&who), "{out:#?}");
        assert!(
            !out.stdout.contains(secret),
            "a token was printed: {out:#?}"
        );

        guard.release().await.unwrap();
        waiting.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn semaphore_lists_its_holders_without_tokens() {
    within(async {
        let (srv, url, app) = app().await;
        let one = app
            .semaphore("partner-api", 8)
            .lease(Duration::from_secs(10))
            .acquire()
            .await
            .unwrap();
        let three = app
            .semaphore("partner-api", 8)
            .lease(Duration::from_secs(20))
            .acquire_many(3)
            .await
            .unwrap();
        let out = run(&["semaphore", "partner-api", "--url", &url], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("limit:    8"), "{out:#?}");
        assert!(out.stdout.contains("in use:   4"), "{out:#?}");
        let rows: Vec<&str> = out
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("HOLDER"))
            .skip(1)
            .collect();
        assert_eq!(rows.len(), 2, "{out:#?}");
        // The soonest lease first: the single permit's.
        assert!(rows[0].split_whitespace().nth(1) == Some("1"), "{out:#?}");
        assert!(rows[1].split_whitespace().nth(1) == Some("3"), "{out:#?}");
        let mut conn = srv.conn().await;
        let members: Vec<String> = redis::cmd("ZRANGE")
            .arg("leasehold:sem:{partner-api}")
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(members.len(), 4);
        for member in members {
            let token = member.split(':').next().unwrap();
            assert!(!out.stdout.contains(token), "a token was printed: {out:#?}");
        }
        drop((one, three));

        let out = run(&["semaphore", "never:used", "--url", &url], None).await;
        out.assert_code(0);
        assert!(out.stdout.contains("no permit held"), "{out:#?}");
    })
    .await;
}

#[tokio::test]
async fn show_tells_held_from_free() {
    within(async {
        let (srv, url, app) = app().await;
        let held = hold(&app, "stock:sku-7", Duration::from_secs(10)).await;
        let freed = app.lock("order:1").acquire().await.unwrap();
        let freed_fence = freed.fence();
        freed.release().await.unwrap();

        let out = run(&["show", "stock:sku-7", "--url", &url], None).await;
        out.assert_code(0);
        assert_eq!(field(&out, "key"), "stock:sku-7");
        assert_eq!(field(&out, "state"), "held");
        let remaining: f64 = field(&out, "remaining")
            .strip_suffix('s')
            .unwrap()
            .parse()
            .unwrap();
        assert!((8.0..=10.0).contains(&remaining), "{out:#?}");
        assert_eq!(field(&out, "last fence"), held.fence().to_string());
        assert_eq!(field(&out, "waiters"), "no");
        let token = owner_token(&srv, "stock:sku-7").await;
        assert!(!out.stdout.contains(&token), "{out:#?}");

        // A free lock is an answer: exit 0.
        let out = run(&["show", "order:1", "--url", &url], None).await;
        out.assert_code(0);
        assert_eq!(field(&out, "state"), "free");
        assert_eq!(field(&out, "remaining"), "-");
        assert_eq!(field(&out, "last fence"), freed_fence.to_string());
        let out = run(&["show", "never:used", "--url", &url], None).await;
        out.assert_code(0);
        assert_eq!(field(&out, "last fence"), "none");

        // Another prefix is another set of locks.
        let shop = Locker::builder()
            .url(&url)
            .prefix("shop")
            .build()
            .await
            .unwrap();
        let other = shop.lock("cart:9").acquire().await.unwrap();
        let out = run(&["show", "cart:9", "--url", &url], None).await;
        assert_eq!(field(out.assert_code(0), "state"), "free");
        let out = run(&["show", "cart:9", "--url", &url, "--prefix", "shop"], None).await;
        assert_eq!(field(out.assert_code(0), "state"), "held");

        // A key the library refuses is a usage error.
        let out = run(&["show", "", "--url", &url], None).await;
        out.assert_code(2);
        assert!(out.stderr.contains("invalid lock key"), "{out:#?}");

        other.release().await.unwrap();
        held.release().await.unwrap();
    })
    .await;
}
