//! TLS under mysql_async through rustls (feature `tls`): the driver's `SslOpts` for what a
//! URL's `ssl-mode` asks (whose roots, which checks, a client certificate), its files read
//! once, when the locker is built.
//!
//! mysql_async builds its rustls configuration itself, on the process's default crypto
//! provider and with its own verifier: the roots and the checks are handed to it as data.
//! The roots are always given explicitly (the file of `ssl-ca`, else the operating system's
//! or `SSL_CERT_FILE`'s), never the driver's compiled-in bundle, so that every engine of
//! leasehold trusts the same roots.

use mysql_async::{ClientIdentity, SslOpts};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::ssl::{TlsSettings, Verify};

/// The driver's TLS options for `settings` (whose mode needs TLS).
pub(super) fn ssl_opts(settings: &TlsSettings) -> Result<SslOpts, String> {
    // The driver's rustls builds on the process's default provider; with the aws-lc-rs
    // provider of another client compiled in beside ring, rustls could not choose by itself.
    // The first one installed stays (the Redis and ZooKeeper engines install ring too).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut ssl = SslOpts::default();
    ssl = match (settings.verify(), &settings.ca) {
        // Nothing checked: the driver's verifier still wants roots to be built on, and the
        // handshake's signatures are still checked (the server holds the key it showed).
        (Verify::Nothing, _) => ssl.with_danger_accept_invalid_certs(true),
        (verify, ca) => {
            let roots = match ca {
                Some(path) => {
                    let bytes = std::fs::read(path).map_err(|e| {
                        format!(
                            "cannot read ssl-ca {} (PEM certificates): {e}",
                            path.display()
                        )
                    })?;
                    certificates(&bytes).map_err(|e| format!("ssl-ca {}: {e}", path.display()))?
                }
                None => native_roots()?,
            };
            ssl.with_root_certs(roots.into_iter().map(Into::into).collect())
                .with_disable_built_in_roots(true)
                .with_danger_skip_domain_validation(verify == Verify::Chain)
        }
    };
    if let Some((cert, key)) = &settings.client_cert {
        let cert_pem = std::fs::read(cert).map_err(|e| {
            format!(
                "cannot read ssl-cert {} (PEM certificates): {e}",
                cert.display()
            )
        })?;
        certificates(&cert_pem).map_err(|e| format!("ssl-cert {}: {e}", cert.display()))?;
        let key_pem = std::fs::read(key).map_err(|e| {
            format!(
                "cannot read ssl-key {} (a PEM private key, unencrypted): {e}",
                key.display()
            )
        })?;
        PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            format!(
                "ssl-key {} holds no usable private key (an unencrypted PEM key: PKCS#8, \
                 PKCS#1 or SEC1): {e}",
                key.display()
            )
        })?;
        ssl = ssl.with_client_identity(Some(ClientIdentity::new(cert_pem.into(), key_pem.into())));
    }
    Ok(ssl)
}

/// Every certificate of a PEM text, in DER (as the driver reads a buffer); at least one.
fn certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|cert| cert.map(|cert| cert.as_ref().to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("no CERTIFICATE in it".to_owned());
    }
    Ok(certs)
}

/// The operating system's roots, or those of `SSL_CERT_FILE` / `SSL_CERT_DIR` when set (the
/// loader the other engines use); unreadable entries are skipped, as there.
fn native_roots() -> Result<Vec<Vec<u8>>, String> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        return Err(format!(
            "no trusted root certificates found in the operating system's store (or \
             SSL_CERT_FILE / SSL_CERT_DIR){}; name the CA that signed the server's \
             certificate with ssl-ca=/path/ca.pem",
            found
                .errors
                .first()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ));
    }
    Ok(found
        .certs
        .into_iter()
        .map(|cert| cert.as_ref().to_vec())
        .collect())
}

/// Why the handshake failed, if a certificate or the TLS negotiation is the cause (the rustls
/// error that tokio-rustls wraps in an `io::Error`, or that the driver wraps in its own).
pub(super) fn refusal(e: &mysql_async::Error) -> Option<&'static str> {
    use rustls::{CertificateError, Error};
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cause {
        let found = err.downcast_ref::<Error>().or_else(|| {
            err.downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|inner| inner.downcast_ref::<Error>())
        });
        if let Some(e) = found {
            return Some(match e {
                Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                ) => {
                    "presented a certificate for another host name (ssl-mode=VERIFY_IDENTITY \
                     checks the URL's host against it, and with this driver VERIFY_CA does \
                     too): connect by a name the certificate holds"
                }
                Error::InvalidCertificate(_) => {
                    "presented a certificate this client does not accept (checked against \
                     ssl-ca, or without it the operating system's roots and SSL_CERT_FILE): \
                     name the CA that signed it with ssl-ca=/path/ca.pem"
                }
                Error::AlertReceived(_) | Error::NoCertificatesPresented => {
                    "refused the TLS handshake (does it want a client certificate this client \
                     did not give or it does not accept? see ssl-cert and ssl-key)"
                }
                Error::PeerIncompatible(_) => {
                    "could not agree on TLS with this client (TLS 1.2 or 1.3, with the ring \
                     provider's cipher suites)"
                }
                _ => return None,
            });
        }
        cause = err.source();
    }
    None
}
