//! `release`: refused without `--force`, asking for the key unless `--yes`, and what the
//! holder finds out.

use std::time::Duration;

use leasehold::LockError;

use crate::{app, hold, run, within, WARNING};

#[tokio::test]
async fn release_force_yes_frees_the_lock_and_the_holder_finds_out() {
    within(async {
        let (_srv, url, app) = app().await;
        let holder = hold(&app, "stock:sku-7", Duration::from_millis(600)).await;

        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(0);
        assert!(
            out.stdout.contains("deleted the lock on stock:sku-7"),
            "{out:#?}"
        );
        assert!(out.stderr.contains(WARNING), "{out:#?}");
        assert!(!out.stderr.contains("type the key"), "--yes asks nothing");
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(2), holder.lost())
            .await
            .expect("the holder's guard reports the lock lost at its next renewal");
        assert!(matches!(
            holder.release().await,
            Err(LockError::Lost { .. })
        ));

        // Nothing left to delete: exit 1.
        let out = run(
            &["release", "stock:sku-7", "--force", "--yes", "--url", &url],
            None,
        )
        .await;
        out.assert_code(1);
        assert!(
            out.stdout.contains("is not held; nothing deleted"),
            "{out:#?}"
        );
    })
    .await;
}

#[tokio::test]
async fn release_without_force_is_refused() {
    within(async {
        let (_srv, url, app) = app().await;
        let holder = app.lock("stock:sku-7").acquire().await.unwrap();

        for args in [
            &["release", "stock:sku-7", "--url", &url][..],
            &["release", "stock:sku-7", "--yes", "--url", &url][..],
        ] {
            let out = run(args, Some("stock:sku-7\n")).await;
            out.assert_code(2);
            assert!(out.stderr.contains("add --force"), "{out:#?}");
            assert!(out.stderr.contains("Usage: leasehold release"), "{out:#?}");
            assert_eq!(out.stdout, "");
        }
        assert!(holder.is_held());
        assert!(app.inspect("stock:sku-7").await.unwrap().held);
        holder.release().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn release_asks_for_the_key_and_does_nothing_on_a_wrong_answer() {
    within(async {
        let (_srv, url, app) = app().await;
        // A short lease, renewed by the watchdog, so that the holder finds out soon.
        let holder = hold(&app, "stock:sku-7", Duration::from_millis(600)).await;
        let args = ["release", "stock:sku-7", "--force", "--url", &url];

        for input in [
            Some("stock:sku-8\n"),
            Some("stock:sku-7 \n"),
            Some(""),
            None,
        ] {
            let out = run(&args, input).await;
            out.assert_code(1);
            assert!(out.stderr.contains("nothing deleted"), "{out:#?}");
            assert!(!out.stdout.contains("deleted the lock"), "{out:#?}");
            assert!(holder.is_held());
            assert!(app.inspect("stock:sku-7").await.unwrap().held);
        }

        let out = run(&args, Some("stock:sku-7\n")).await;
        out.assert_code(0);
        let warned = out.stderr.find(WARNING).expect("the warning is printed");
        let asked = out
            .stderr
            .find("type the key to confirm:")
            .expect("the prompt is printed");
        assert!(
            warned < asked,
            "the warning comes before the question: {out:#?}"
        );
        assert!(out.stdout.contains("deleted the lock on stock:sku-7"));
        assert!(!app.inspect("stock:sku-7").await.unwrap().held);
        tokio::time::timeout(Duration::from_secs(2), holder.lost())
            .await
            .expect("the holder finds out");
    })
    .await;
}
