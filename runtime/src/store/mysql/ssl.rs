//! What a URL asks of TLS, as data: the mode, the roots and the client certificate, read by
//! [`url`](super::url) and acted on by the TLS connector (`tls.rs`, feature `tls`), which both
//! stand on it.

use std::path::PathBuf;

/// MySQL's `ssl-mode`: whether a connection is encrypted, and what of the server's
/// certificate is checked (see `docs/security-mysql.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Never TLS.
    Disabled,
    /// The default. MySQL's clients encrypt when the server offers TLS; mysql_async cannot
    /// fall back to plain text once it asked for TLS, so here this is plain text, as
    /// `Disabled` (documented: ask for `REQUIRED` or stronger to encrypt).
    Preferred,
    /// TLS or no connection; the certificate unchecked (checked as by `VerifyCa` when
    /// `ssl-ca` is given, as MySQL's clients do).
    Required,
    /// TLS, the certificate's chain checked against the roots, not its host name. mysql_async
    /// 0.37 cannot skip the name alone with the rustls of this build (it looks for the
    /// words of an older rustls error), so the name is checked too: stricter, never weaker.
    VerifyCa,
    /// TLS, the certificate's chain and its host name checked.
    VerifyIdentity,
}

impl SslMode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disabled => "DISABLED",
            SslMode::Preferred => "PREFERRED",
            SslMode::Required => "REQUIRED",
            SslMode::VerifyCa => "VERIFY_CA",
            SslMode::VerifyIdentity => "VERIFY_IDENTITY",
        }
    }

    /// Whether every connection is encrypted (or refused).
    pub(crate) fn needs_tls(self) -> bool {
        matches!(
            self,
            SslMode::Required | SslMode::VerifyCa | SslMode::VerifyIdentity
        )
    }
}

/// What a server's certificate is checked for.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Nothing: encryption against eavesdroppers, not against a man in the middle.
    Nothing,
    /// That it chains to one of the roots.
    Chain,
    /// That it chains to one of the roots and names the host of the URL.
    ChainAndName,
}

/// The URL's TLS parameters, read but not acted on (no file is opened here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    pub(crate) mode: SslMode,
    /// `ssl-ca`: a PEM file of the roots a server's chain must end in; the operating
    /// system's (or `SSL_CERT_FILE`'s) when absent.
    pub(crate) ca: Option<PathBuf>,
    /// `ssl-cert` and `ssl-key`: a client certificate and its key, as PEM files.
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
}

impl TlsSettings {
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) fn verify(&self) -> Verify {
        match self.mode {
            SslMode::VerifyIdentity => Verify::ChainAndName,
            SslMode::VerifyCa => Verify::Chain,
            SslMode::Required if self.ca.is_some() => Verify::Chain,
            _ => Verify::Nothing,
        }
    }
}
