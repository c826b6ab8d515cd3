//! `watch`: acquisitions, releases, expiries and waiters as they happen.

use std::time::Duration;

use leasehold::{LockError, Locker};

use crate::support::command;
use crate::{app, event, hold, spawn, within};

#[tokio::test]
async fn watch_prints_acquisitions_and_releases() {
    within(async {
        let (srv, url, app) = app().await;
        let mut watch = spawn(
            command(&["watch", "stock:sku-7", "--for", "1500ms", "--url", &url]),
            None,
        );
        let first = watch.line_containing("watching stock:sku-7").await;
        assert_eq!(
            event(&first),
            format!(
                "watching stock:sku-7 (prefix \"leasehold\", redis {}): free (last fence none)",
                srv.addr()
            ),
            "{first}"
        );

        let guard = hold(&app, "stock:sku-7", Duration::from_secs(10)).await;
        let fence = guard.fence();
        watch.line_containing("acquired").await;
        guard.release().await.unwrap();
        let out = watch.finish().await;
        out.assert_code(0);

        let events: Vec<&str> = out.stdout.lines().skip(1).map(event).collect();
        assert_eq!(events.len(), 2, "{out:#?}");
        let lease: f64 = events[0]
            .strip_prefix(&format!("acquired (fence {fence}, lease "))
            .and_then(|rest| rest.strip_suffix("s)"))
            .unwrap_or_else(|| panic!("{out:#?}"))
            .parse()
            .unwrap();
        assert!((9.0..=10.0).contains(&lease), "{out:#?}");
        // Released long before its 10 s lease could run out.
        assert_eq!(events[1], "released", "{out:#?}");
    })
    .await;
}

#[tokio::test]
async fn watch_tells_an_expiry_and_sees_waiters() {
    within(async {
        let (_srv, url, app) = app().await;
        let mut watch = spawn(
            command(&[
                "--url",
                &url,
                "watch",
                "stock:sku-7",
                "--for",
                "2500ms",
                "--interval",
                "50ms",
            ]),
            None,
        );
        watch.line_containing("watching stock:sku-7").await;

        // A lease that is not renewed, and someone who waits for it in vain.
        let guard = app
            .lock("stock:sku-7")
            .lease(Duration::from_millis(800))
            .watchdog(false)
            .acquire()
            .await
            .unwrap();
        let waiter = Locker::connect(&url).await.unwrap();
        let refused = waiter
            .lock("stock:sku-7")
            .wait(Duration::from_millis(100))
            .acquire()
            .await;
        assert!(matches!(refused, Err(LockError::Busy { .. })));
        watch.line_containing("expired or released").await;
        let out = watch.finish().await;
        out.assert_code(0);
        drop(guard);

        let events: Vec<&str> = out.stdout.lines().skip(1).map(event).collect();
        assert_eq!(events.len(), 3, "{out:#?}");
        assert!(events[0].starts_with("acquired (fence "), "{out:#?}");
        assert_eq!(events[1..], ["waiters appeared", "expired or released"]);
    })
    .await;
}
