//! One connection to PostgreSQL — plain or TLS, authenticated by password (cleartext, MD5 or
//! SCRAM-SHA-256) or client certificate — that runs simple queries and, opened in replication
//! mode, streams the write-ahead log (`START_REPLICATION`, the copy-both sub-protocol).
//! Reading is cancel-safe: what arrived stays in the buffer for the next call.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::frontend;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::message::{self, Backend, ServerError};
use super::params::{ConnParams, SslMode};

/// What went wrong talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The network, TLS or the protocol failed: the connection is gone.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The server answered with an error.
    #[error("{0}")]
    Server(ServerError),
    /// No answer in time.
    #[error("no answer from the server within {0:?}")]
    Timeout(Duration),
}

impl WireError {
    /// The server's SQLSTATE code, when it answered with an error.
    pub fn code(&self) -> Option<&str> {
        match self {
            WireError::Server(e) => Some(&e.code),
            _ => None,
        }
    }
}

/// A result set of a simple query: the columns (name, type oid) and rows of text values.
#[derive(Debug, Default)]
pub struct Rows {
    /// Column names and type oids.
    pub columns: Vec<(String, u32)>,
    /// Rows, each value as text or NULL.
    pub rows: Vec<Vec<Option<Bytes>>>,
}

impl Rows {
    /// The text of `column` in row `row`.
    pub fn text(&self, row: usize, column: &str) -> Option<String> {
        let i = self.columns.iter().position(|(n, _)| n == column)?;
        self.rows
            .get(row)?
            .get(i)?
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An open, authenticated connection.
pub struct Connection {
    io: Box<dyn Io>,
    buf: BytesMut,
    out: BytesMut,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects and authenticates; `replication` opens a logical replication connection
    /// (`replication=database`), which also runs SQL.
    pub async fn connect(
        p: &ConnParams,
        replication: bool,
        timeout: Duration,
    ) -> Result<Connection, WireError> {
        tokio::time::timeout(timeout, Self::open(p, replication))
            .await
            .map_err(|_| WireError::Timeout(timeout))?
    }

    async fn open(p: &ConnParams, replication: bool) -> Result<Connection, WireError> {
        let mut tcp = TcpStream::connect((p.host.as_str(), p.port)).await?;
        tcp.set_nodelay(true)?;
        let io: Box<dyn Io> = match p.ssl {
            SslMode::Disable => Box::new(tcp),
            SslMode::Verify => {
                let mut out = BytesMut::new();
                frontend::ssl_request(&mut out);
                tcp.write_all(&out).await?;
                let mut answer = [0u8; 1];
                tcp.read_exact(&mut answer).await?;
                if answer[0] != b'S' {
                    return Err(message::invalid("the server does not offer TLS").into());
                }
                let connector = tokio_rustls::TlsConnector::from(Arc::new(tls_config(p)?));
                let name = ServerName::try_from(p.host.clone())
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                Box::new(connector.connect(name, tcp).await?)
            }
        };
        let mut c = Connection {
            io,
            buf: BytesMut::with_capacity(64 * 1024),
            out: BytesMut::new(),
        };
        let mut params = vec![
            ("user", p.user.as_str()),
            ("database", p.dbname.as_str()),
            ("application_name", "rivus-cdc"),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO"),
            ("TimeZone", "UTC"),
            ("extra_float_digits", "3"),
        ];
        if replication {
            params.push(("replication", "database"));
        }
        frontend::startup_message(params.iter().copied(), &mut c.out)?;
        c.flush().await?;
        c.authenticate(p).await?;
        loop {
            match c.recv().await? {
                Backend::ReadyForQuery => return Ok(c),
                Backend::Error(e) => return Err(WireError::Server(e)),
                _ => {}
            }
        }
    }

    async fn authenticate(&mut self, p: &ConnParams) -> Result<(), WireError> {
        let password = || {
            p.password.clone().ok_or_else(|| {
                WireError::Io(message::invalid(
                    "the server asks for a password and the URL has none",
                ))
            })
        };
        let mut scram: Option<ScramSha256> = None;
        loop {
            match self.recv().await? {
                Backend::Authentication(0, _) => return Ok(()),
                Backend::Authentication(3, _) => {
                    frontend::password_message(password()?.as_bytes(), &mut self.out)?;
                }
                Backend::Authentication(5, salt) => {
                    let salt: [u8; 4] = salt[..4.min(salt.len())]
                        .try_into()
                        .map_err(|_| message::invalid("an MD5 salt"))?;
                    let hash = postgres_protocol::authentication::md5_hash(
                        p.user.as_bytes(),
                        password()?.as_bytes(),
                        salt,
                    );
                    frontend::password_message(hash.as_bytes(), &mut self.out)?;
                }
                Backend::Authentication(10, mechanisms) => {
                    let offered = String::from_utf8_lossy(&mechanisms).into_owned();
                    if !offered.split('\0').any(|m| m == SCRAM_SHA_256) {
                        return Err(message::invalid(format!(
                            "no supported SASL mechanism among {offered:?}"
                        ))
                        .into());
                    }
                    let s = ScramSha256::new(password()?.as_bytes(), ChannelBinding::unsupported());
                    frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut self.out)?;
                    scram = Some(s);
                }
                Backend::Authentication(11, data) => {
                    let s = scram
                        .as_mut()
                        .ok_or_else(|| message::invalid("SASL out of order"))?;
                    s.update(&data)?;
                    frontend::sasl_response(s.message(), &mut self.out)?;
                }
                Backend::Authentication(12, data) => {
                    let s = scram
                        .as_mut()
                        .ok_or_else(|| message::invalid("SASL out of order"))?;
                    s.finish(&data)?;
                    continue;
                }
                Backend::Authentication(code, _) => {
                    return Err(message::invalid(format!("authentication method {code}")).into())
                }
                Backend::Error(e) => return Err(WireError::Server(e)),
                _ => continue,
            }
            self.flush().await?;
        }
    }

    /// Runs `sql` (one or more statements) and returns the rows of the last statement that
    /// returned rows.
    pub async fn query(&mut self, sql: &str) -> Result<Rows, WireError> {
        frontend::query(sql, &mut self.out)?;
        self.flush().await?;
        let mut rows = Rows::default();
        let mut error = None;
        loop {
            match self.recv().await? {
                Backend::RowDescription(cols) => {
                    rows = Rows {
                        columns: cols,
                        rows: Vec::new(),
                    }
                }
                Backend::DataRow(values) => rows.rows.push(values),
                Backend::Error(e) => error = Some(e),
                Backend::ReadyForQuery => {
                    return match error {
                        Some(e) => Err(WireError::Server(e)),
                        None => Ok(rows),
                    }
                }
                _ => {}
            }
        }
    }

    /// Runs `sql` and hands each row to `each` as it arrives (for result sets too large to
    /// keep), after the column description.
    pub async fn query_each(
        &mut self,
        sql: &str,
        mut each: impl FnMut(&[(String, u32)], Vec<Option<Bytes>>),
    ) -> Result<(), WireError> {
        frontend::query(sql, &mut self.out)?;
        self.flush().await?;
        let mut columns = Vec::new();
        let mut error = None;
        loop {
            match self.recv().await? {
                Backend::RowDescription(cols) => columns = cols,
                Backend::DataRow(values) => each(&columns, values),
                Backend::Error(e) => error = Some(e),
                Backend::ReadyForQuery => {
                    return match error {
                        Some(e) => Err(WireError::Server(e)),
                        None => Ok(()),
                    }
                }
                _ => {}
            }
        }
    }

    /// Sends `START_REPLICATION ...` and waits for the stream to begin.
    pub async fn start_replication(&mut self, command: &str) -> Result<(), WireError> {
        frontend::query(command, &mut self.out)?;
        self.flush().await?;
        loop {
            match self.recv().await? {
                Backend::CopyBothResponse => return Ok(()),
                Backend::Error(e) => {
                    // The server still sends ReadyForQuery; the connection is dropped anyway.
                    return Err(WireError::Server(e));
                }
                _ => {}
            }
        }
    }

    /// The next piece of the replication stream (`None`: the server ended it). Cancel-safe.
    pub async fn recv_copy(&mut self) -> Result<Option<Bytes>, WireError> {
        loop {
            match self.recv().await? {
                Backend::CopyData(b) => return Ok(Some(b)),
                Backend::CopyDone => return Ok(None),
                Backend::Error(e) => return Err(WireError::Server(e)),
                _ => {}
            }
        }
    }

    /// Sends one piece of the replication stream (a status update).
    pub async fn send_copy(&mut self, data: &[u8]) -> Result<(), WireError> {
        frontend::CopyData::new(data)?.write(&mut self.out);
        self.flush().await
    }

    /// Ends the session politely.
    pub async fn close(mut self) {
        frontend::terminate(&mut self.out);
        let _ = self.flush().await;
        let _ = self.io.shutdown().await;
    }

    async fn flush(&mut self) -> Result<(), WireError> {
        if !self.out.is_empty() {
            self.io.write_all(&self.out).await?;
            self.io.flush().await?;
            self.out.clear();
        }
        Ok(())
    }

    /// The next message; cancel-safe (bytes read stay in the buffer).
    async fn recv(&mut self) -> Result<Backend, WireError> {
        loop {
            if let Some(m) = message::take(&mut self.buf)? {
                return Ok(m);
            }
            if self.buf.capacity() - self.buf.len() < 8 * 1024 {
                self.buf.reserve(64 * 1024);
            }
            if self.io.read_buf(&mut self.buf).await? == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )
                .into());
            }
        }
    }
}

fn tls_config(p: &ConnParams) -> Result<rustls::ClientConfig, WireError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        WireError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what}: {e}"),
        ))
    };
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &p.ca_file {
        for cert in CertificateDer::pem_file_iter(ca).map_err(|e| bad(ca, &e))? {
            roots
                .add(cert.map_err(|e| bad(ca, &e))?)
                .map_err(|e| bad(ca, &e))?;
        }
    }
    let provider = Arc::new(rivus_sdk::tls::crypto_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad("TLS", &e))?
        .with_root_certificates(roots);
    Ok(match &p.client_cert {
        Some((cert, key)) => {
            let certs = CertificateDer::pem_file_iter(cert)
                .map_err(|e| bad(cert, &e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(cert, &e))?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| bad("client certificate", &e))?
        }
        None => builder.with_no_client_auth(),
    })
}
