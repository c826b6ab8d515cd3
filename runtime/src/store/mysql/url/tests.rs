use super::*;

fn read_ok(url: &str) -> Target {
    parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn mode(url: &str) -> SslMode {
    tls_settings_of(url)
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .mode
}

fn refused(url: &str) -> String {
    let e = parse(url).expect_err(url);
    assert!(matches!(e, LockError::Config { .. }), "{url}: {e:?}");
    let again = validate(url);
    // validate opens no file, so only a file's refusal may pass it.
    if let Err(v) = again {
        assert!(matches!(v, LockError::Config { .. }), "{url}: {v:?}");
    }
    let text = e.to_string();
    assert!(!text.contains("s3cret"), "{text}");
    text
}

#[test]
fn host_credentials_and_database_reach_the_driver_and_the_password_is_not_shown() {
    for scheme in ["mysql", "mariadb"] {
        let t = read_ok(&format!("{scheme}://locks:s3cr%40t@db.internal:3307/shop"));
        assert_eq!(t.opts.ip_or_hostname(), "db.internal");
        assert_eq!(t.opts.tcp_port(), 3307);
        assert_eq!(t.opts.user(), Some("locks"));
        assert_eq!(t.opts.pass(), Some("s3cr@t"));
        assert_eq!(t.opts.db_name(), Some("shop"));
        assert!(t.opts.ssl_opts().is_none());
        assert!(!t.shown.contains("s3cr"), "{}", t.shown);
        assert!(!format!("{t:?}").contains("s3cr"), "{t:?}");
    }
    let t = read_ok("mysql://root@127.0.0.1/shop");
    assert_eq!(t.opts.tcp_port(), 3306);
    assert_eq!(t.opts.pass(), None);
}

#[test]
fn without_ssl_mode_the_connection_is_preferred_which_is_plain_text_here() {
    assert_eq!(mode("mysql://u:s3cret@db/shop"), SslMode::Preferred);
    let t = read_ok("mysql://u:s3cret@db/shop?ssl-mode=preferred");
    assert!(t.opts.ssl_opts().is_none());
    let t = read_ok("mysql://u:s3cret@db/shop?ssl-mode=DISABLED");
    assert!(t.opts.ssl_opts().is_none());
}

#[cfg(feature = "tls")]
#[test]
fn every_mode_is_read_in_any_case_and_spelling_and_says_what_it_checks() {
    for (written, expected, verify) in [
        ("DISABLED", SslMode::Disabled, Verify::Nothing),
        ("disabled", SslMode::Disabled, Verify::Nothing),
        ("Preferred", SslMode::Preferred, Verify::Nothing),
        ("REQUIRED", SslMode::Required, Verify::Nothing),
        ("verify_ca", SslMode::VerifyCa, Verify::Chain),
        ("VERIFY-CA", SslMode::VerifyCa, Verify::Chain),
        (
            "VERIFY_IDENTITY",
            SslMode::VerifyIdentity,
            Verify::ChainAndName,
        ),
    ] {
        for name in ["ssl-mode", "ssl_mode"] {
            let url = format!("mysql://u:s3cret@db/shop?{name}={written}");
            let tls = tls_settings_of(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(tls.mode, expected, "{url}");
            assert_eq!(tls.verify(), verify, "{url}");
        }
    }
}

#[cfg(feature = "tls")]
#[test]
fn mysql_async_s_own_tls_flags_mean_the_modes_they_match() {
    for (params, expected) in [
        ("require_ssl=true", SslMode::VerifyIdentity),
        ("require_ssl=true&verify_identity=false", SslMode::VerifyCa),
        ("require_ssl=true&verify_ca=false", SslMode::Required),
        (
            "require_ssl=true&verify_ca=false&verify_identity=false",
            SslMode::Required,
        ),
        ("require_ssl=false", SslMode::Disabled),
    ] {
        assert_eq!(
            mode(&format!("mysql://u@db/shop?{params}")),
            expected,
            "{params}"
        );
    }
    for bad in [
        "verify_ca=false",
        "require_ssl=false&verify_identity=true",
        "ssl-mode=REQUIRED&require_ssl=true",
        "require_ssl=yes",
    ] {
        let e = refused(&format!("mysql://u:s3cret@db/shop?{bad}"));
        assert!(
            e.contains("require_ssl") || e.contains("neither true nor false"),
            "{bad}: {e}"
        );
    }
}

#[cfg(feature = "tls")]
#[test]
fn a_ca_without_a_mode_checks_the_chain_and_required_with_a_ca_too() {
    let tls = tls_settings_of("mysql://u@db/shop?ssl-ca=%2Fetc%2Fshop%2Fca.pem").unwrap();
    assert_eq!(tls.mode, SslMode::VerifyCa);
    assert_eq!(tls.ca, Some(PathBuf::from("/etc/shop/ca.pem")));
    let tls = tls_settings_of("mysql://u@db/shop?ssl-mode=REQUIRED&ssl_ca=/ca.pem").unwrap();
    assert_eq!(tls.verify(), Verify::Chain);
}

#[test]
fn certificates_need_a_mode_that_uses_them_and_come_in_pairs() {
    for bad in [
        "ssl-mode=DISABLED&ssl-ca=/ca.pem",
        "ssl-mode=PREFERRED&ssl-cert=/c.pem&ssl-key=/k.pem",
    ] {
        let e = refused(&format!("mysql://u:s3cret@db/shop?{bad}"));
        assert!(e.contains("does not use certificates"), "{bad}: {e}");
    }
    for bad in [
        "ssl-mode=VERIFY_IDENTITY&ssl-cert=/c.pem",
        "ssl-mode=VERIFY_IDENTITY&ssl-key=/k.pem",
        "ssl-mode=VERIFY_IDENTITY&ssl-cert=&ssl-key=/k.pem",
        "ssl-mode=VERIFY_IDENTITY&ssl-ca=",
    ] {
        let e = refused(&format!("mysql://u:s3cret@db/shop?{bad}"));
        assert!(
            e.contains("both ssl-cert and ssl-key") || e.contains("is empty"),
            "{bad}: {e}"
        );
    }
    #[cfg(feature = "tls")]
    {
        let tls = tls_settings_of(
            "mysql://u@db/shop?ssl-mode=VERIFY_IDENTITY&ssl-cert=/c.pem&ssl-key=/k.pem",
        )
        .unwrap();
        assert_eq!(
            tls.client_cert,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/k.pem")))
        );
    }
}

#[test]
fn unknown_modes_and_parameters_name_what_is_accepted() {
    for bad in ["VERIFY_FULL", "verify-full", "require", ""] {
        let e = refused(&format!("mysql://u:s3cret@db/shop?ssl-mode={bad}"));
        assert!(e.contains(MODES), "{bad}: {e}");
    }
    let e = refused("mysql://u:s3cret@db/shop?sslmode=require");
    assert!(e.contains("ssl-mode"), "{e}");
    let e = refused("mysql://u:s3cret@db/shop?charset=utf8");
    assert!(e.contains("unknown parameter \"charset\""), "{e}");
    assert!(e.contains("pool_max"), "{e}");
    let e = refused("mysql://u:s3cret@db/shop?client_found_rows=true");
    assert!(e.contains("affected-row counts"), "{e}");
    let e = refused("mysql://u:s3cret@db/shop?built_in_roots=false");
    assert!(e.contains("ssl-ca"), "{e}");
}

#[test]
fn the_driver_s_parameters_reach_it_and_its_complaints_are_config_errors() {
    let t = read_ok("mysql://u:s3cret@db/shop?pool_min=2&pool_max=7&tcp_keepalive=5000");
    assert_eq!(t.opts.pool_opts().constraints().min(), 2);
    assert_eq!(t.opts.pool_opts().constraints().max(), 7);
    assert_eq!(
        t.opts.tcp_keepalive(),
        Some(std::time::Duration::from_secs(5))
    );
    // A pool_max alone below the driver's default minimum (10) lowers the minimum with it.
    let t = read_ok("mysql://u:s3cret@db/shop?pool_max=4");
    assert_eq!(t.opts.pool_opts().constraints().min(), 4);
    assert_eq!(t.opts.pool_opts().constraints().max(), 4);
    let t = read_ok("mysql://u:s3cret@db/shop?pool_max=40");
    assert_eq!(t.opts.pool_opts().constraints().max(), 40);
    // Connections go where the URL says, unless it asks for the driver's switch to the socket.
    assert!(!read_ok("mysql://u@localhost/shop").opts.prefer_socket());
    assert!(read_ok("mysql://u@localhost/shop?prefer_socket=true")
        .opts
        .prefer_socket());
    let t = read_ok("mysql://u@localhost/shop?socket=%2Frun%2Fmysqld%2Fmysqld.sock");
    assert_eq!(t.opts.socket(), Some("/run/mysqld/mysqld.sock"));
    for bad in [
        "pool_max=many",
        "pool_min=9&pool_max=2",
        "tcp_nodelay=perhaps",
    ] {
        let e = refused(&format!("mysql://u:s3cret@db/shop?{bad}"));
        assert!(e.contains("cannot be read"), "{bad}: {e}");
    }
}

#[test]
fn urls_that_are_not_mysql_s_are_refused_with_the_expected_shape() {
    for bad in [
        "postgres://u:s3cret@db/shop",
        "mysql//u:s3cret@db/shop",
        "db:3306",
    ] {
        let e = refused(bad);
        assert!(
            e.contains("mysql://user:password@host:3306/database"),
            "{bad}: {e}"
        );
    }
    for bad in ["mysql://u:s3cret@/shop", "mysql:///shop"] {
        let e = refused(bad);
        assert!(e.contains("needs a host"), "{bad}: {e}");
    }
    let e = refused("mysql://u:s3cret#@db/shop");
    assert!(e.contains("%23"), "{e}");
}

#[test]
fn the_cleartext_plugin_needs_tls() {
    let e = refused("mysql://u:s3cret@db/shop?enable_cleartext_plugin=true");
    assert!(e.contains("enable_cleartext_plugin"), "{e}");
    read_ok("mysql://u:s3cret@db/shop?enable_cleartext_plugin=false");
}

#[cfg(not(feature = "tls"))]
#[test]
fn without_the_tls_feature_only_plain_text_is_accepted() {
    for url in [
        "mysql://u:s3cret@db/shop?ssl-mode=REQUIRED",
        "mysql://u:s3cret@db/shop?ssl-mode=VERIFY_IDENTITY",
        "mysql://u:s3cret@db/shop?ssl-ca=/ca.pem",
        "mysql://u:s3cret@db/shop?require_ssl=true",
    ] {
        let e = refused(url);
        assert!(e.contains("`tls` feature"), "{url}: {e}");
    }
    assert_eq!(mode("mysql://u@db/shop"), SslMode::Preferred);
}

#[cfg(feature = "tls")]
mod files {
    use super::*;

    /// A scratch directory of this test process, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("leasehold-mysql-url-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn file(&self, name: &str, text: &str) -> String {
            let path = self.0.join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn unreadable_or_empty_files_are_refused_at_parse_but_not_at_validate() {
        let scratch = Scratch::new("bad");
        let missing = scratch.0.join("missing.pem").display().to_string();
        let empty = scratch.file("empty.pem", "");
        let junk = scratch.file(
            "junk.pem",
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        );
        for (url, says) in [
            (format!("mysql://u:s3cret@db/shop?ssl-mode=VERIFY_IDENTITY&ssl-ca={missing}"), "cannot read ssl-ca"),
            (format!("mysql://u:s3cret@db/shop?ssl-mode=VERIFY_CA&ssl-ca={empty}"), "no CERTIFICATE"),
            (format!("mysql://u:s3cret@db/shop?ssl-mode=VERIFY_CA&ssl-ca={junk}"), "not PEM"),
            (
                format!("mysql://u:s3cret@db/shop?ssl-mode=REQUIRED&ssl-cert={missing}&ssl-key={missing}"),
                "cannot read ssl-cert",
            ),
        ] {
            validate(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
            let e = refused(&url);
            assert!(e.contains(says), "{url}: {e}");
        }
    }

    #[test]
    fn required_checks_nothing_and_the_verify_modes_trust_only_the_named_roots() {
        let t = read_ok("mysql://u@db/shop?ssl-mode=REQUIRED");
        let ssl = t.opts.ssl_opts().expect("TLS");
        assert!(ssl.accept_invalid_certs());
        // The system's roots (or SSL_CERT_FILE's), never the driver's own bundle.
        if rustls_native_certs::load_native_certs().certs.is_empty() {
            let e = refused("mysql://u:s3cret@db/shop?ssl-mode=VERIFY_IDENTITY");
            assert!(e.contains("ssl-ca"), "{e}");
        } else {
            let t = read_ok("mysql://u@db/shop?ssl-mode=VERIFY_IDENTITY");
            let ssl = t.opts.ssl_opts().expect("TLS");
            assert!(!ssl.accept_invalid_certs());
            assert!(!ssl.skip_domain_validation());
            assert!(ssl.disable_built_in_roots());
            assert!(!ssl.root_certs().is_empty());
        }
    }
}
