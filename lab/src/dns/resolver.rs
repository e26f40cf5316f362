//! A validating resolver for the lab: Unbound (Debian's `unbound`), started on its own
//! loopback address with the lab root as its only hint and the lab anchor as its trust
//! anchor. An independent validator: what it says about a lab zone must equal ours.
//!
//! Unbound sends every query below the root to port 53, whatever port the root hint has,
//! so each lab zone is given to it as a stub zone with the lab port: start the resolver
//! after the zones it is to resolve exist. Only the discovery of servers is given; the
//! chain of trust Unbound validates on its own.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{LabDns, ROOT};

/// Where the lab resolver listens (on the lab's port).
pub const RESOLVER: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 53);

#[derive(Debug, thiserror::Error)]
pub enum ResolverError {
    #[error("cannot start unbound (Debian package unbound): {0}")]
    Spawn(std::io::Error),
    #[error("unbound did not answer within {0:?}: {1}")]
    NotReady(Duration, String),
    #[error("lab resolver: {0}")]
    Io(#[from] std::io::Error),
}

/// The running Unbound; dropping it kills the process (by its PID) and removes its files.
pub struct LabResolver {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for LabResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabResolver")
            .field("addr", &self.addr)
            .finish()
    }
}

impl LabResolver {
    pub async fn start(lab: &LabDns) -> Result<Self, ResolverError> {
        let dir = tempfile::tempdir()?;
        let port = lab.port();
        let conf = format!(
            "server:\n\
             \x20 interface: {RESOLVER}\n\
             \x20 port: {port}\n\
             \x20 do-ip6: no\n\
             \x20 do-not-query-localhost: no\n\
             \x20 username: \"\"\n\
             \x20 chroot: \"\"\n\
             \x20 directory: \"{dir}\"\n\
             \x20 pidfile: \"\"\n\
             \x20 use-syslog: no\n\
             \x20 logfile: \"\"\n\
             \x20 verbosity: 0\n\
             \x20 module-config: \"validator iterator\"\n\
             \x20 trust-anchor-file: \"{anchor}\"\n\
             \x20 ede: yes\n\
             \x20 local-zone: \"test.\" nodefault\n\
             \x20 val-log-level: 2\n\
             \x20 cache-max-ttl: 1\n\
             \x20 cache-max-negative-ttl: 1\n\
             \x20 infra-host-ttl: 1\n\
             \x20 access-control: 127.0.0.0/8 allow\n\
             remote-control:\n\
             \x20 control-enable: no\n\
             stub-zone:\n\
             \x20 name: \".\"\n\
             \x20 stub-addr: {ROOT}@{port}\n",
            dir = dir.path().display(),
            anchor = lab.trust_anchor_path().display(),
        );
        let mut conf = conf;
        for (zone, addrs) in lab.zone_servers() {
            if zone == "." {
                continue;
            }
            conf.push_str(&format!("stub-zone:\n  name: \"{zone}\"\n"));
            for addr in addrs {
                conf.push_str(&format!("  stub-addr: {addr}@{port}\n"));
            }
        }
        let conf_path = dir.path().join("unbound.conf");
        std::fs::write(&conf_path, conf)?;
        let child = Command::new("unbound")
            .arg("-d")
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(ResolverError::Spawn)?;
        let mut resolver = Self {
            child,
            addr: SocketAddr::new(IpAddr::V4(RESOLVER), port),
            _dir: dir,
        };
        resolver.wait_ready().await?;
        Ok(resolver)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Polls with a query for `. SOA` until Unbound answers; bounded to five seconds.
    async fn wait_ready(&mut self) -> Result<(), ResolverError> {
        let limit = Duration::from_secs(5);
        let query = crate::wire::build_query(
            &hickory_proto::rr::Name::root(),
            hickory_proto::rr::RecordType::SOA,
            true,
        )
        .to_vec()
        .map_err(|e| ResolverError::NotReady(limit, e.to_string()))?;
        let mut last = String::new();
        for _ in 0..25 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(ResolverError::NotReady(
                    limit,
                    format!("unbound exited: {status}"),
                ));
            }
            match ask(self.addr, &query).await {
                Ok(()) => return Ok(()),
                Err(e) => {
                    last = e.to_string();
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        Err(ResolverError::NotReady(limit, last))
    }
}

/// One query over UDP; any answer within 200 ms counts.
async fn ask(addr: SocketAddr, query: &[u8]) -> std::io::Result<()> {
    let socket =
        tokio::net::UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)).await?;
    socket.connect(addr).await?;
    socket.send(query).await?;
    let mut buf = [0u8; 1232];
    match tokio::time::timeout(Duration::from_millis(200), socket.recv(&mut buf)).await {
        Ok(received) => received.map(|_| ()),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no answer within 200 ms",
        )),
    }
}

impl Drop for LabResolver {
    fn drop(&mut self) {
        // `Child::kill` signals exactly this process by its PID.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
