//! Where the settings come from: the config file, the environment and options, in that order.

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;

use crate::support::{command, Output};
use crate::{run, spawn, within};

#[tokio::test]
async fn the_config_file_the_environment_and_options_in_that_order() {
    within(async {
        let srv = RedisServer::start().await;
        let url = srv.url();
        let cfg = Locker::builder()
            .url(&url)
            .prefix("cfg")
            .build()
            .await
            .unwrap();
        let guard = cfg.lock("k").acquire().await.unwrap();
        let file = srv.dir().join("leasehold.toml");
        std::fs::write(
            &file,
            format!("url = \"{url}\"\nprefix = \"cfg\"\nop_timeout = \"1s\"\n"),
        )
        .unwrap();
        let file = file.to_str().unwrap();
        let state = |out: &Output| {
            out.assert_code(0);
            out.stdout
                .lines()
                .find_map(|l| l.strip_prefix("state:"))
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|| panic!("{out:#?}"))
        };

        let out = run(&["show", "k", "--config", file], None).await;
        assert_eq!(state(&out), "held");
        // The environment overrides the file, and options override both.
        let mut cmd = command(&["show", "k", "--config", file]);
        cmd.env("LEASEHOLD_PREFIX", "other");
        assert_eq!(state(&spawn(cmd, None).finish().await), "free");
        let mut cmd = command(&["show", "k", "--config", file, "--prefix", "cfg"]);
        cmd.env("LEASEHOLD_PREFIX", "other");
        assert_eq!(state(&spawn(cmd, None).finish().await), "held");
        // The environment alone.
        let mut cmd = command(&["show", "k"]);
        cmd.env("LEASEHOLD_URL", &url)
            .env("LEASEHOLD_PREFIX", "cfg");
        assert_eq!(state(&spawn(cmd, None).finish().await), "held");

        // A bad file or variable is a configuration error.
        let bad = srv.dir().join("bad.toml");
        std::fs::write(&bad, "leese = \"30s\"\n").unwrap();
        let out = run(&["show", "k", "--config", bad.to_str().unwrap()], None).await;
        out.assert_code(2);
        assert!(out.stderr.contains("unknown field `leese`"), "{out:#?}");
        let out = run(
            &["show", "k", "--config", "/nonexistent/leasehold.toml"],
            None,
        )
        .await;
        out.assert_code(2);
        assert!(out.stderr.contains("cannot read"), "{out:#?}");
        let mut cmd = command(&["show", "k", "--url", &url]);
        cmd.env("LEASEHOLD_OP_TIMEOUT", "soon");
        let out = spawn(cmd, None).finish().await;
        out.assert_code(2);
        assert!(out.stderr.contains("LEASEHOLD_OP_TIMEOUT"), "{out:#?}");
        let out = run(&["show", "k", "--url", &url, "--prefix", "a{b}"], None).await;
        out.assert_code(2);

        guard.release().await.unwrap();
    })
    .await;
}
