//! The exit statuses of an unreachable server, a bad URL and usage errors, and the help that
//! documents them.

use leasehold_tests::harness::RedisServer;

use crate::support::command;
use crate::{run, spawn, within};

#[tokio::test]
async fn an_unreachable_server_or_a_bad_url_exits_3_with_a_clear_message() {
    within(async {
        let srv = RedisServer::start().await;
        let url = srv.url();
        srv.stop();
        let endpoint = format!("127.0.0.1:{}", srv.port());
        for args in [
            &["list", "--url", &url][..],
            &["show", "k", "--url", &url][..],
            &["release", "k", "--force", "--yes", "--url", &url][..],
            &["watch", "k", "--for", "1s", "--url", &url][..],
        ] {
            let out = run(args, None).await;
            out.assert_code(3);
            assert!(
                out.stderr
                    .starts_with(&format!("error: cannot reach redis at {endpoint}: ")),
                "{out:#?}"
            );
            assert_eq!(out.stdout, "");
        }

        let out = run(&["list", "--url", "redis://127.0.0.1:1"], None).await;
        out.assert_code(3);
        assert!(
            out.stderr
                .starts_with("error: cannot reach redis at 127.0.0.1:1: refused the connection"),
            "{out:#?}"
        );
        // From the environment too, and never with the password.
        let mut cmd = command(&["show", "k"]);
        cmd.env("LEASEHOLD_URL", "redis://ops:hunter2@127.0.0.1:1");
        let out = spawn(cmd, None).finish().await;
        out.assert_code(3);
        assert!(
            out.stderr.contains("cannot reach redis at 127.0.0.1:1"),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("hunter2"), "{out:#?}");

        for bad in ["http://ops:hunter2@cache:6379", "not a url"] {
            let out = run(&["list", "--url", bad], None).await;
            out.assert_code(3);
            assert!(
                out.stderr.starts_with("error: cannot use the URL"),
                "{out:#?}"
            );
            assert!(out.stderr.contains("redis://host:port"), "{out:#?}");
            assert!(!out.stderr.contains("hunter2"), "{out:#?}");
        }
    })
    .await;
}

#[tokio::test]
async fn usage_errors_exit_2_and_help_documents_the_exit_statuses() {
    within(async {
        let out = run(&["frob"], None).await;
        out.assert_code(2);
        assert!(out.stderr.contains("unknown command \"frob\""), "{out:#?}");
        assert!(out.stderr.contains("Usage: leasehold"), "{out:#?}");
        assert_eq!(out.stdout, "");
        for args in [
            &[][..],
            &["list", "--bogus"][..],
            &["show"][..],
            &["show", "a", "b"][..],
            &["watch", "k", "--for", "soon"][..],
            &["list", "--yes"][..],
            &["list", "--timeout", "0s"][..],
        ] {
            let out = run(args, None).await;
            out.assert_code(2);
            assert!(out.stderr.starts_with("error: "), "{args:?}: {out:#?}");
            assert!(
                out.stderr.contains("Usage: leasehold"),
                "{args:?}: {out:#?}"
            );
        }

        let out = run(&["--help"], None).await;
        out.assert_code(0);
        for needle in [
            "Exit status:",
            "0  done",
            "1  `release` deleted nothing",
            "2  usage",
            "3  the engine unreachable",
            "LEASEHOLD_URL",
            "LEASEHOLD_PREFIX",
        ] {
            assert!(out.stdout.contains(needle), "{needle:?} in {out:#?}");
        }
        for (command, needle) in [
            ("list", "SCAN"),
            ("show", "KEY"),
            ("release", "will NOT be told"),
            ("watch", "--interval"),
        ] {
            let out = run(&[command, "--help"], None).await;
            out.assert_code(0);
            assert!(out.stdout.contains(needle), "{command}: {out:#?}");
        }
        let out = run(&["--version"], None).await;
        out.assert_code(0);
        assert!(out.stdout.starts_with("leasehold "), "{out:#?}");
    })
    .await;
}
