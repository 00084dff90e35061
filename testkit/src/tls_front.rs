//! A TLS front for a plain TCP service, to test a client's TLS settings against a real server
//! that speaks no TLS itself (the dev Elasticsearch node): it presents the dev server
//! certificate for 127.0.0.1, requires a client certificate signed by the dev CA, and pipes
//! bytes both ways — what a TLS-terminating proxy in front of a cluster does.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// A running TLS front; stops when dropped.
#[derive(Debug)]
pub struct TlsFront {
    addr: SocketAddr,
    verified: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn invalid(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string())
}

impl TlsFront {
    /// Listens on an ephemeral port of 127.0.0.1 and forwards to `upstream` (`host:port`),
    /// with the certificates of `tls_dir` (`ca.crt`, `server.crt`, `server.key`; see
    /// [`services::tls_dir`](crate::services::tls_dir)).
    pub async fn start(upstream: &str, tls_dir: &Path) -> std::io::Result<TlsFront> {
        let provider = Arc::new(rivus_sdk::tls::crypto_provider());
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(tls_dir.join("server.crt"))
                .map_err(invalid)?
                .collect::<Result<_, _>>()
                .map_err(invalid)?;
        let key = PrivateKeyDer::from_pem_file(tls_dir.join("server.key")).map_err(invalid)?;
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_file_iter(tls_dir.join("ca.crt")).map_err(invalid)? {
            roots.add(ca.map_err(invalid)?).map_err(invalid)?;
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .build()
                .map_err(invalid)?;
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(invalid)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .map_err(invalid)?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (verified, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (v, r, upstream) = (
            Arc::clone(&verified),
            Arc::clone(&refused),
            upstream.to_owned(),
        );
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (acceptor, v, r, upstream) = (
                    acceptor.clone(),
                    Arc::clone(&v),
                    Arc::clone(&r),
                    upstream.clone(),
                );
                tokio::spawn(async move {
                    let mut tls = match acceptor.accept(socket).await {
                        Ok(s) => s,
                        Err(_) => {
                            r.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    };
                    v.fetch_add(1, Ordering::Relaxed);
                    if let Ok(mut plain) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    }
                });
            }
        });
        Ok(TlsFront {
            addr,
            verified,
            refused,
            task,
        })
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Handshakes that presented a valid client certificate.
    pub fn verified(&self) -> usize {
        self.verified.load(Ordering::Relaxed)
    }

    /// Handshakes refused (no client certificate, an unknown one, a client that does not
    /// trust the server).
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::Relaxed)
    }
}
