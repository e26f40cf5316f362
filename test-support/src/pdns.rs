//! A real PowerDNS Authoritative (Debian's `pdns-server` with the sqlite3 backend) for
//! one test: its database and configuration in the test's directory, DNS on the addresses
//! and port given, its HTTP API on a free port of 127.0.0.1, stopped by its PID.
//!
//! Every cache is off, so what the API changes is served at once: the daemon waits for
//! what the servers answer, and a test that waited for a cache would only be slower.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::knot::{Proc, Result};

/// The packages a PowerDNS test needs (`sqlite3` makes the backend's database).
pub const PACKAGES: &[&str] = &["pdns-server", "pdns-backend-sqlite3", "sqlite3"];

const SCHEMA: &str = "/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql";

/// A `pdns_server`, killed by its PID when dropped.
pub struct Pdns {
    proc: Proc,
    /// The API's port on 127.0.0.1.
    pub api: u16,
    pub dir: PathBuf,
}

impl Drop for Pdns {
    fn drop(&mut self) {
        self.proc.kill();
    }
}

/// A port free on 127.0.0.1 for TCP and UDP at the moment of asking.
pub fn free_port() -> Result<u16> {
    for _ in 0..50 {
        let Ok(tcp) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(addr) = tcp.local_addr() else { continue };
        if UdpSocket::bind(addr).is_ok() {
            return Ok(addr.port());
        }
    }
    Err("no free loopback port".into())
}

/// How a test's server differs from the default one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PdnsOptions {
    /// `direct-dnskey=yes`: DNSKEY records stored as records are served beside the
    /// keystore's keys (another signer's key, RFC 8901); unset, the server's default `no`.
    pub direct_dnskey: bool,
    /// `default-ksk-algorithm`: the algorithm of the key a zone secured through the API
    /// (`"dnssec": true`) gets (`rsasha256`, `ecdsa256`, `ed25519`); unset, the server's
    /// default `ecdsa256`. An RSA key is 2048 bits.
    pub default_algorithm: Option<&'static str>,
    /// `default-zsk-algorithm`: a zone secured through the API gets a ZSK of it beside
    /// its KSK (a KSK/ZSK split); unset, one key (a CSK).
    pub zsk_algorithm: Option<&'static str>,
}

impl Pdns {
    /// Starts the server in `dir` (created), answering DNS on `addresses` at `port`, with
    /// `api_key` for its API; returns once the API listens.
    pub fn start(dir: &Path, addresses: &[Ipv4Addr], port: u16, api_key: &str) -> Result<Self> {
        Self::start_with(dir, addresses, port, api_key, PdnsOptions::default())
    }

    /// [`Pdns::start`] with `options`.
    pub fn start_with(
        dir: &Path,
        addresses: &[Ipv4Addr],
        port: u16,
        api_key: &str,
        options: PdnsOptions,
    ) -> Result<Self> {
        crate::knot::ensure_packages(PACKAGES)?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let db = dir.join("pdns.sqlite3");
        let sql = std::fs::read_to_string(SCHEMA).map_err(|e| format!("{SCHEMA}: {e}"))?;
        let mut sqlite = Command::new("sqlite3")
            .arg(&db)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("sqlite3: {e}"))?;
        if let Some(mut stdin) = sqlite.stdin.take() {
            use std::io::Write as _;
            stdin
                .write_all(sql.as_bytes())
                .map_err(|e| format!("sqlite3: {e}"))?;
        }
        let made = sqlite.wait().map_err(|e| format!("sqlite3: {e}"))?;
        if !made.success() {
            return Err(format!("sqlite3 could not make {}", db.display()));
        }
        let api = free_port()?;
        let listen: Vec<String> = addresses.iter().map(Ipv4Addr::to_string).collect();
        // No security poll (a DNS query to the Internet); only loopback; no zone cache (a
        // zone loaded by pdnsutil is served at once, not at the next refresh); a short
        // default TTL (the SOA, the DNSKEY) as everything else in the lab.
        let conf = format!(
            "launch=gsqlite3\ngsqlite3-database={db}\ngsqlite3-dnssec=yes\n\
             local-address={listen}\nlocal-port={port}\n\
             api=yes\napi-key={api_key}\nwebserver=yes\nwebserver-address=127.0.0.1\n\
             webserver-port={api}\nwebserver-allow-from=127.0.0.0/8\n\
             socket-dir={dir}\nguardian=no\ndaemon=no\ndisable-syslog=yes\n\
             security-poll-suffix=\ncache-ttl=0\nquery-cache-ttl=0\nnegquery-cache-ttl=0\n\
             zone-metadata-cache-ttl=0\ndnssec-key-cache-ttl=0\ndomain-metadata-cache-ttl=0\n\
             zone-cache-refresh-interval=0\ndefault-ttl=2\nloglevel=4\n",
            db = db.display(),
            listen = listen.join(", "),
            dir = dir.display(),
        );
        let mut conf = conf;
        if options.direct_dnskey {
            conf.push_str("direct-dnskey=yes\n");
        }
        if let Some(algorithm) = options.default_algorithm {
            conf.push_str(&format!("default-ksk-algorithm={algorithm}\n"));
            // RSA needs a size (the smallest validators accept, quick to make); the
            // others have theirs.
            if algorithm.starts_with("rsa") {
                conf.push_str("default-ksk-size=2048\n");
            }
        }
        if let Some(algorithm) = options.zsk_algorithm {
            conf.push_str(&format!("default-zsk-algorithm={algorithm}\n"));
            if algorithm.starts_with("rsa") {
                conf.push_str("default-zsk-size=2048\n");
            }
        }
        std::fs::write(dir.join("pdns.conf"), conf).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("pdns.log")).map_err(|e| e.to_string())?;
        let proc = Proc::spawn(
            "pdns_server",
            Command::new("/usr/sbin/pdns_server")
                .arg(format!("--config-dir={}", dir.display()))
                .stdout(Stdio::null())
                .stderr(log),
        )?;
        let mut pdns = Self {
            proc,
            api,
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", api)).is_err() {
            if Instant::now() > deadline || !pdns.proc.alive() {
                return Err(format!("pdns_server's API never listened\n{}", pdns.log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(pdns)
    }

    /// The API's base URL.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.api)
    }

    /// `pdnsutil` on this server's configuration (it writes the database directly).
    pub fn pdnsutil(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("pdnsutil")
            .arg(format!("--config-dir={}", self.dir.display()))
            .args(args)
            .output()
            .map_err(|e| format!("pdnsutil: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "pdnsutil {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Loads `zone` from a zone file's text (`pdnsutil load-zone`).
    pub fn load_zone(&self, zone: &str, body: &str) -> Result<()> {
        let file = self.dir.join(format!("{}zone", zone.replace('.', "_")));
        std::fs::write(&file, body).map_err(|e| e.to_string())?;
        let path = file.display().to_string();
        self.pdnsutil(&["load-zone", zone, &path]).map(drop)
    }

    /// The DS (`tag alg 2 HEX`) of the zone's entry point, as PowerDNS computes it.
    pub fn ds(&self, zone: &str) -> Result<String> {
        let out = self.pdnsutil(&["export-zone-ds", zone])?;
        out.lines()
            .filter_map(|l| l.split_once(" DS "))
            .map(|(_, rdata)| {
                rdata
                    .split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_string()
            })
            .find(|rdata| rdata.split_whitespace().nth(2) == Some("2"))
            .ok_or_else(|| format!("no SHA-256 DS for {zone} in {out:?}"))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pdns.log")).unwrap_or_default()
    }
}
