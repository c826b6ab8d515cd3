//! TLS under tokio-postgres through rustls (feature `tls`): the client configuration a URL's
//! `sslmode` asks for (whose roots, which checks, a client certificate), built once per
//! locker, and the connector that wraps every connection's socket in it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

use super::url::{Roots, SslMode, TlsSettings, Verify};
use crate::error::LockError;

/// Makes the TLS side of each connection; cheap to clone (one shared client configuration).
/// `None` with `sslmode=disable`, when tokio-postgres never asks for a handshake.
#[derive(Clone)]
pub(super) struct MakeRustls {
    config: Option<Arc<ClientConfig>>,
}

impl MakeRustls {
    /// The connector for `settings`: reads the files they name (roots, client certificate),
    /// or the operating system's roots.
    ///
    /// # Errors
    /// [`LockError::Config`] when a file cannot be read or holds no usable PEM item, or no
    /// root could be found.
    pub(super) fn new(settings: &TlsSettings) -> Result<Self, LockError> {
        if settings.mode == SslMode::Disable {
            return Ok(Self { config: None });
        }
        Ok(Self {
            config: Some(Arc::new(client_config(settings)?)),
        })
    }
}

/// The rustls configuration of every connection of one locker.
fn client_config(settings: &TlsSettings) -> Result<ClientConfig, LockError> {
    // Our provider given to the builder, not installed process-wide: the application may have
    // installed another, and two compiled in would leave rustls unable to choose.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| LockError::config(format!("postgres: rustls refused its protocols: {e}")))?;
    let builder = match settings.verify() {
        // rustls's own verifier (revocation lists aside: we take none).
        Verify::ChainAndName => builder.with_webpki_verifier(
            rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots(&settings.roots)?),
                provider,
            )
            .build()
            .map_err(|e| {
                LockError::config(format!("postgres: the TLS roots are not usable: {e}"))
            })?,
        ),
        Verify::Chain => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ServerCheck {
                roots: Some(roots(&settings.roots)?),
                algorithms,
            })),
        Verify::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ServerCheck {
                roots: None,
                algorithms,
            })),
    };
    let mut config = match &settings.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = pem_certificates(cert, "sslcert")?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                LockError::config(format!(
                    "postgres: cannot read sslkey {} (a PEM private key, unencrypted): {e}",
                    key.display()
                ))
            })?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                LockError::config(format!(
                    "postgres: sslcert {} and sslkey do not make a client certificate: {e}",
                    cert.display()
                ))
            })?
        }
    };
    // What PostgreSQL 17 expects (and demands with sslnegotiation=direct); older servers
    // ignore it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(config)
}

/// The roots a server's chain must end in.
fn roots(roots: &Roots) -> Result<RootCertStore, LockError> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            for cert in pem_certificates(path, "sslrootcert")? {
                store.add(cert).map_err(|e| {
                    LockError::config(format!(
                        "postgres: sslrootcert {} holds a certificate rustls cannot use as a \
                         root: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        Roots::Native | Roots::System => {
            // The loader the Redis and etcd clients use: SSL_CERT_FILE / SSL_CERT_DIR when
            // set, else the system's store. Unreadable entries are skipped, as there.
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(LockError::config(format!(
                    "postgres: no trusted root certificates found in the operating system's \
                     store (or SSL_CERT_FILE / SSL_CERT_DIR){}; name the CA that signed the \
                     server's certificate with sslrootcert=/path/ca.pem",
                    found
                        .errors
                        .first()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                )));
            }
        }
    }
    Ok(store)
}

/// Every certificate of a PEM file; at least one.
fn pem_certificates(
    path: &std::path::Path,
    param: &str,
) -> Result<Vec<CertificateDer<'static>>, LockError> {
    let unreadable = |e: &dyn std::fmt::Display| {
        LockError::config(format!(
            "postgres: cannot read {param} {} (PEM certificates): {e}",
            path.display()
        ))
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| unreadable(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(&e))?;
    if certs.is_empty() {
        return Err(unreadable(&"no CERTIFICATE in it"));
    }
    Ok(certs)
}

/// What `sslmode=require` and `verify-ca` check of a server's certificate (`verify-full` uses
/// rustls's own verifier): with `roots`, that its chain ends in one of them, valid now; the
/// host name never. The handshake's signatures are always checked, so the server holds the
/// key of the certificate it showed.
#[derive(Debug)]
struct ServerCheck {
    roots: Option<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for ServerCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    /// `domain` is the host of the URL being connected to (not `hostaddr`): the name the
    /// certificate must hold under `verify-full`, and the SNI when it is a DNS name. Called for
    /// every connection, also those tokio-postgres will not encrypt (`sslmode=disable`, a Unix
    /// socket, whose `domain` is empty), so what cannot work fails only at the handshake.
    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnect> {
        let handshake = match &self.config {
            None => Err("sslmode=disable: no TLS".to_owned()),
            Some(config) => ServerName::try_from(domain.to_owned())
                .map(|name| (config.clone(), name))
                .map_err(|e| format!("{domain:?} is no host name or IP address for TLS: {e}")),
        };
        Ok(RustlsConnect(handshake))
    }
}

/// The TLS handshake of one connection, or why there can be none.
pub(super) struct RustlsConnect(Result<(Arc<ClientConfig>, ServerName<'static>), String>);

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let (config, name) = self
                .0
                .map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
            let connector = tokio_rustls::TlsConnector::from(config);
            Ok(RustlsStream(connector.connect(name, stream).await?))
        })
    }
}

/// One connection's TLS stream, for tokio-postgres.
pub(super) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    /// None: SCRAM authentication goes without channel binding (`SCRAM-SHA-256`, not
    /// `-PLUS`), as with `channel_binding=prefer`, tokio-postgres's default.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// The rustls error behind a failed handshake, if that is what `e` is (tokio-rustls wraps it
/// in an `io::Error`, whose `source()` skips it).
pub(super) fn rustls_error<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::Error> {
    e.downcast_ref::<rustls::Error>().or_else(|| {
        e.downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    })
}
