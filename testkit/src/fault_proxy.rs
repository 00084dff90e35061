//! A fault-injecting TCP proxy (in the spirit of Toxiproxy) for putting real network faults
//! between a connector and its real server on 127.0.0.1: latency with jitter, a bandwidth
//! limit, resetting every connection, a blackhole (connections stay open, nothing passes until
//! it lifts — as TCP retransmission delivers after a short partition), closing a connection
//! after N bytes, and refusing new connections. Each is switched on and off from the test
//! while traffic flows.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use rivus_testkit::fault_proxy::FaultProxy;
//! let proxy = FaultProxy::start("127.0.0.1:5432").await?;
//! let url = format!("postgres://rivus@{}/rivus", proxy.addr());
//! // ... start the job against `url`, then:
//! proxy.set_blackhole(true);
//! proxy.reset_all();
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// The faults in force; every field off by default.
#[derive(Debug, Default)]
struct Faults {
    latency: Mutex<(Duration, Duration)>,
    /// Bytes per second per direction and connection (0: unlimited).
    bandwidth: AtomicU64,
    blackhole: AtomicBool,
    refuse: AtomicBool,
    /// Close a connection once this many bytes passed it (0: never).
    close_after: AtomicU64,
}

/// A running proxy; dropping it stops it and closes its connections.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    upstream: String,
    faults: Arc<Faults>,
    reset: watch::Sender<u64>,
    open: Arc<AtomicUsize>,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.reset.send_modify(|g| *g += 1);
    }
}

impl FaultProxy {
    /// A proxy on a free port of 127.0.0.1 forwarding to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> std::io::Result<Self> {
        Self::start_on("127.0.0.1:0".parse().expect("an address"), upstream).await
    }

    /// A proxy listening on `listen` (a fixed port, e.g. the one a Kafka broker advertises).
    pub async fn start_on(listen: SocketAddr, upstream: &str) -> std::io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let faults = Arc::new(Faults::default());
        let (reset, _) = watch::channel(0u64);
        let open = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(accept_loop(
            listener,
            upstream.to_owned(),
            Arc::clone(&faults),
            reset.clone(),
            Arc::clone(&open),
            Arc::clone(&accepted),
        ));
        Ok(FaultProxy {
            addr,
            upstream: upstream.to_owned(),
            faults,
            reset,
            open,
            accepted,
            task,
        })
    }

    /// A proxy in front of the server of `url` (`scheme://[user@]host:port/...`), and `url`
    /// pointing at the proxy instead.
    pub async fn in_front_of(url: &str) -> std::io::Result<(Self, String)> {
        let after_scheme = url.find("://").map_or(0, |i| i + 3);
        let rest = &url[after_scheme..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let host_start = rest[..authority_end].rfind('@').map_or(0, |i| i + 1);
        let host_port = &rest[host_start..authority_end];
        if !host_port.contains(':') {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("no host:port in the URL's authority `{host_port}`"),
            ));
        }
        let proxy = Self::start(host_port).await?;
        let start = after_scheme + host_start;
        let proxied = format!(
            "{}{}{}",
            &url[..start],
            proxy.addr(),
            &url[after_scheme + authority_end..]
        );
        Ok((proxy, proxied))
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the proxy forwards to.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections accepted since the start.
    pub fn accepted_connections(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Delays every chunk by `delay` ± `jitter`, each way (throughput is kept: chunks are in
    /// flight together).
    pub fn set_latency(&self, delay: Duration, jitter: Duration) {
        *self.faults.latency.lock() = (delay, jitter);
    }

    /// Limits each direction of each connection to `bytes_per_second` (0: unlimited).
    pub fn set_bandwidth(&self, bytes_per_second: u64) {
        self.faults
            .bandwidth
            .store(bytes_per_second, Ordering::Relaxed);
    }

    /// While on, nothing passes in either direction and connections stay open; what was sent
    /// meanwhile passes once it is off.
    pub fn set_blackhole(&self, on: bool) {
        self.faults.blackhole.store(on, Ordering::Relaxed);
    }

    /// While on, new connections are reset at once (open ones are kept).
    pub fn set_refuse(&self, on: bool) {
        self.faults.refuse.store(on, Ordering::Relaxed);
    }

    /// Resets each connection once `bytes` passed through it (both directions; `None`: never).
    pub fn set_close_after(&self, bytes: Option<u64>) {
        self.faults
            .close_after
            .store(bytes.unwrap_or(0), Ordering::Relaxed);
    }

    /// Resets every open connection now (TCP RST to both ends).
    pub fn reset_all(&self) {
        self.reset.send_modify(|g| *g += 1);
    }

    /// Switches every fault off.
    pub fn clear(&self) {
        self.set_latency(Duration::ZERO, Duration::ZERO);
        self.set_bandwidth(0);
        self.set_blackhole(false);
        self.set_refuse(false);
        self.set_close_after(None);
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: String,
    faults: Arc<Faults>,
    reset: watch::Sender<u64>,
    open: Arc<AtomicUsize>,
    accepted: Arc<AtomicUsize>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        accepted.fetch_add(1, Ordering::Relaxed);
        if faults.refuse.load(Ordering::Relaxed) {
            abort(client);
            continue;
        }
        let (faults, upstream, open) = (Arc::clone(&faults), upstream.clone(), Arc::clone(&open));
        let mut reset = reset.subscribe();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(&upstream).await else {
                abort(client);
                return;
            };
            for s in [&client, &server] {
                let _ = s.set_nodelay(true);
                // Every close is a reset: a fault or `reset_all` must look like a lost
                // connection to both ends, not like a clean end.
                set_reset_on_close(s);
            }
            open.fetch_add(1, Ordering::Relaxed);
            let passed = Arc::new(AtomicU64::new(0));
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let up = pipe(cr, sw, Arc::clone(&faults), Arc::clone(&passed));
            let down = pipe(sr, cw, faults, passed);
            tokio::pin!(up, down);
            let (mut up_done, mut down_done) = (false, false);
            // A clean end of one direction lets the other finish; a fault ends both.
            while !(up_done && down_done) {
                tokio::select! {
                    r = &mut up, if !up_done => match r {
                        Some(()) => up_done = true,
                        None => break,
                    },
                    r = &mut down, if !down_done => match r {
                        Some(()) => down_done = true,
                        None => break,
                    },
                    _ = reset.changed() => break,
                }
            }
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Makes closing `s` send a TCP reset (SO_LINGER 0).
fn set_reset_on_close(s: &TcpStream) {
    let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
}

/// Closes `s` with a TCP reset.
fn abort(s: TcpStream) {
    set_reset_on_close(&s);
    drop(s);
}

/// Forwards `from` to `to` with the faults applied. Returns `Some` on a clean end of input,
/// `None` when the connection must be reset.
async fn pipe(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    faults: Arc<Faults>,
    passed: Arc<AtomicU64>,
) -> Option<()> {
    // The reader timestamps chunks; the writer sends each when it is due (latency without
    // losing throughput), holding them while the blackhole is on.
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(256);
    let reading = {
        let faults = Arc::clone(&faults);
        async move {
            let mut seed = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0x2545_f491_4f6c_dd1d, |d| d.as_nanos() as u64)
                | 1;
            loop {
                let mut buf = vec![0u8; 16 * 1024];
                match from.read(&mut buf).await {
                    Ok(0) => return Some(()),
                    Ok(n) => {
                        buf.truncate(n);
                        let (delay, jitter) = *faults.latency.lock();
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        let spread = if jitter.is_zero() {
                            Duration::ZERO
                        } else {
                            Duration::from_nanos(seed % (jitter.as_nanos() as u64 + 1))
                        };
                        if tx
                            .send((Instant::now() + delay + spread, buf))
                            .await
                            .is_err()
                        {
                            return None;
                        }
                    }
                    Err(_) => return None,
                }
            }
        }
    };
    let writing = async move {
        let mut last_due = Instant::now();
        while let Some((due, chunk)) = rx.recv().await {
            // Jitter must not reorder bytes.
            let due = due.max(last_due);
            last_due = due;
            tokio::time::sleep_until(due.into()).await;
            while faults.blackhole.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // Close after N bytes: pass exactly the bytes left, then reset.
            let limit = faults.close_after.load(Ordering::Relaxed);
            let before = passed.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            if limit > 0 && before + chunk.len() as u64 >= limit {
                let left = limit.saturating_sub(before) as usize;
                let _ = to.write_all(&chunk[..left.min(chunk.len())]).await;
                return None;
            }
            if to.write_all(&chunk).await.is_err() {
                return None;
            }
            let bps = faults.bandwidth.load(Ordering::Relaxed);
            if bps > 0 {
                tokio::time::sleep(Duration::from_secs_f64(chunk.len() as f64 / bps as f64)).await;
            }
        }
        let _ = to.shutdown().await;
        Some(())
    };
    let (r, w) = tokio::join!(reading, writing);
    r.and(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on 127.0.0.1.
    async fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.into_split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    async fn proxy() -> FaultProxy {
        FaultProxy::start(&echo().await.to_string()).await.unwrap()
    }

    async fn round_trip(c: &mut TcpStream, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
        c.write_all(bytes).await?;
        let mut back = vec![0u8; bytes.len()];
        c.read_exact(&mut back).await?;
        Ok(back)
    }

    #[tokio::test]
    async fn urls_are_pointed_at_the_proxy() {
        let up = echo().await;
        let (p, url) = FaultProxy::in_front_of(&format!("postgres://u:pw@{up}/db?x=1"))
            .await
            .unwrap();
        assert_eq!(url, format!("postgres://u:pw@{}/db?x=1", p.addr()));
        assert_eq!(p.upstream(), up.to_string());
        let (p, url) = FaultProxy::in_front_of(&format!("http://{up}"))
            .await
            .unwrap();
        assert_eq!(url, format!("http://{}", p.addr()));
        assert!(FaultProxy::in_front_of("redis://localhost/0")
            .await
            .is_err());
    }

    #[tokio::test]
    async fn passes_bytes_unchanged() {
        let p = proxy().await;
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(round_trip(&mut c, &data).await.unwrap(), data);
        assert_eq!(p.open_connections(), 1);
    }

    #[tokio::test]
    async fn latency_delays_each_way() {
        let p = proxy().await;
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        round_trip(&mut c, b"warm").await.unwrap();
        p.set_latency(Duration::from_millis(100), Duration::from_millis(20));
        let t = Instant::now();
        round_trip(&mut c, b"ping").await.unwrap();
        let rtt = t.elapsed();
        assert!(
            rtt >= Duration::from_millis(200) && rtt < Duration::from_millis(1000),
            "{rtt:?}"
        );
        p.clear();
        let t = Instant::now();
        round_trip(&mut c, b"ping").await.unwrap();
        assert!(t.elapsed() < Duration::from_millis(100));
    }

    #[tokio::test]
    async fn bandwidth_limits_throughput() {
        let p = proxy().await;
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        p.set_bandwidth(200_000);
        let t = Instant::now();
        round_trip(&mut c, &vec![7u8; 100_000]).await.unwrap();
        // 100 kB each way through 200 kB/s: about half a second at least.
        assert!(
            t.elapsed() >= Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn blackhole_holds_traffic_until_it_lifts() {
        let p = proxy().await;
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        p.set_blackhole(true);
        c.write_all(b"held").await.unwrap();
        let mut buf = [0u8; 4];
        let read = tokio::time::timeout(Duration::from_millis(300), c.read_exact(&mut buf)).await;
        assert!(read.is_err(), "nothing passes during the blackhole");
        assert_eq!(p.open_connections(), 1, "the connection stays open");
        p.set_blackhole(false);
        tokio::time::timeout(Duration::from_secs(2), c.read_exact(&mut buf))
            .await
            .expect("passes once lifted")
            .unwrap();
        assert_eq!(&buf, b"held");
    }

    #[tokio::test]
    async fn reset_all_breaks_open_connections() {
        let p = proxy().await;
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        round_trip(&mut c, b"ok").await.unwrap();
        p.reset_all();
        let mut buf = [0u8; 1];
        let r = tokio::time::timeout(Duration::from_secs(2), c.read(&mut buf))
            .await
            .expect("the client sees the reset");
        assert!(matches!(r, Ok(0) | Err(_)), "connection ended: {r:?}");
        // New connections work again.
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        assert_eq!(round_trip(&mut c, b"again").await.unwrap(), b"again");
    }

    #[tokio::test]
    async fn close_after_n_bytes_and_refuse() {
        let p = proxy().await;
        p.set_close_after(Some(1000));
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        let r = round_trip(&mut c, &vec![1u8; 5000]).await;
        assert!(r.is_err(), "closed after 1000 bytes");
        p.set_close_after(None);
        p.set_refuse(true);
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(2), round_trip(&mut c, b"x"))
            .await
            .expect("refused at once");
        assert!(r.is_err(), "a refused connection carries nothing");
        p.set_refuse(false);
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        assert_eq!(round_trip(&mut c, b"y").await.unwrap(), b"y");
    }
}
