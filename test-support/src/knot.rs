//! Real DNS software on loopback for the end-to-end suite and the benchmark: Knot DNS
//! (`knotd`, driven with `knotc` and `keymgr`) as authoritative servers, Unbound as the
//! validating resolver. Shared by the Knot worlds ([`crate::world`], the benchmarks'
//! [`crate::bench_world`]) and the benchmarks themselves.
//!
//! Every process is a [`Proc`]: killed by its PID when dropped, so a failing test leaves
//! nothing behind. Every wait is bounded in rounds and in time.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dnssec_warden::dns::wire::{build_query, parse_name};
use dnssec_warden::dns::{NetTransport, Transport};
use dnssec_warden::dnssec::Dnskey;

pub type Result<T> = std::result::Result<T, String>;

/// The Debian packages the suite and the benchmark run.
pub const PACKAGES: &[&str] = &["knot", "knot-dnsutils", "unbound", "dnsperf"];

/// Installs the Debian packages that are missing, as tests/run.sh does: with apt-get when
/// running as root, otherwise an error saying what to install.
pub fn ensure_packages(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            let out = Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", p])
                .output();
            !matches!(out, Ok(o) if String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        return Err(format!(
            "missing Debian packages {missing:?}: run `sudo apt-get install {}` (or tests/run.sh)",
            missing.join(" ")
        ));
    }
    eprintln!("installing {}", missing.join(" "));
    // The packages must not start their own daemons on port 53 (policy-rc.d 101).
    let _ = std::fs::write("/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n");
    let _ = Command::new("chmod")
        .args(["+x", "/usr/sbin/policy-rc.d"])
        .status();
    let update = Command::new("apt-get").args(["update", "-qq"]).status();
    let install = Command::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .status();
    let _ = std::fs::remove_file("/usr/sbin/policy-rc.d");
    match (update, install) {
        (Ok(_), Ok(s)) if s.success() => Ok(()),
        (_, other) => Err(format!("apt-get install {missing:?} failed: {other:?}")),
    }
}

/// A port free (UDP and TCP) on every address: 53 when it is, else one the kernel picks.
pub fn pick_port(addrs: &[Ipv4Addr]) -> Result<u16> {
    let free = |port: u16| {
        addrs.iter().all(|ip| {
            std::net::UdpSocket::bind((*ip, port)).is_ok()
                && std::net::TcpListener::bind((*ip, port)).is_ok()
        })
    };
    if free(53) {
        return Ok(53);
    }
    let first = addrs.first().copied().unwrap_or(Ipv4Addr::LOCALHOST);
    for _ in 0..50 {
        let port = std::net::UdpSocket::bind((first, 0))
            .and_then(|s| s.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        if free(port) {
            return Ok(port);
        }
    }
    Err("no port free on every address".into())
}

/// A child process stopped by its PID when dropped.
pub struct Proc {
    pub name: String,
    child: Child,
}

impl Proc {
    pub fn spawn(name: &str, command: &mut Command) -> Result<Self> {
        let child = command
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(Self {
            name: name.into(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL, by PID, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM by PID, then SIGKILL if it has not exited within `grace`.
    pub fn terminate(&mut self, grace: Duration) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How Knot signs a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    Off,
    /// Keys made with `keymgr` beforehand (the root, the TLD): their DS is known up front.
    Manual,
    /// Knot's own policy `auto`: a CSK it generates on first signing.
    Auto,
}

/// One zone of one knotd.
#[derive(Debug, Clone)]
pub struct ZoneConf {
    pub name: String,
    /// The zone file; `None` for a secondary, which transfers the zone.
    pub text: Option<String>,
    pub signing: Signing,
    /// Transfers from this primary (a secondary).
    pub primary: Option<Ipv4Addr>,
    /// Sends NOTIFY to and allows transfers by these secondaries.
    pub secondaries: Vec<Ipv4Addr>,
}

impl ZoneConf {
    pub fn new(name: &str, text: String, signing: Signing) -> Self {
        Self {
            name: name.into(),
            text: Some(text),
            signing,
            primary: None,
            secondaries: Vec::new(),
        }
    }

    pub fn secondary(name: &str, primary: Ipv4Addr) -> Self {
        Self {
            name: name.into(),
            text: None,
            signing: Signing::Off,
            primary: Some(primary),
            secondaries: Vec::new(),
        }
    }
}

fn file_name(zone: &str) -> String {
    if zone == "." {
        "root.zone".into()
    } else {
        format!("{}.zone", zone.trim_end_matches('.'))
    }
}

/// What a lab knotd does beyond serving its zones on its address.
#[derive(Debug, Clone, Default)]
pub struct KnotOptions {
    /// Further addresses it answers on (as one TLD operator's server on many).
    pub also_listen: Vec<Ipv4Addr>,
    /// Response rate limiting (`mod-rrl`): responses a second per source and answer,
    /// and the slip (every n-th limited answer sent truncated, the others dropped).
    pub rrl: Option<(u32, u32)>,
    /// Addresses allowed to send dynamic UPDATEs (RFC 2136) to every zone it is the
    /// primary of (Knot's `acl: action: update`): a registry writing DS records.
    pub update_from: Vec<Ipv4Addr>,
}

/// One knotd on its own address, with its own directory, KASP database and control socket.
pub struct Knot {
    pub addr: Ipv4Addr,
    pub port: u16,
    pub dir: PathBuf,
    pub conf: PathBuf,
    proc: Option<Proc>,
    /// The serial last written to each zone file (they only ever grow, for the secondaries).
    serials: Mutex<HashMap<String, u32>>,
}

impl std::fmt::Debug for Knot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Knot({}@{})", self.addr, self.port)
    }
}

/// Serial numbers start at the current time so that restarts never go backwards.
fn serial_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(1)
}

impl Knot {
    /// Writes the configuration and zone files; [`Knot::start`] runs knotd.
    pub fn new(dir: &Path, addr: Ipv4Addr, port: u16, zones: &[ZoneConf]) -> Result<Self> {
        Self::with_options(dir, addr, port, zones, &KnotOptions::default())
    }

    /// [`Knot::new`], listening on more addresses or with response rate limiting.
    pub fn with_options(
        dir: &Path,
        addr: Ipv4Addr,
        port: u16,
        zones: &[ZoneConf],
        options: &KnotOptions,
    ) -> Result<Self> {
        let io = |e: std::io::Error| format!("knot {addr}: {e}");
        std::fs::create_dir_all(dir.join("run")).map_err(io)?;
        std::fs::create_dir_all(dir.join("db")).map_err(io)?;
        let listen: Vec<String> = std::iter::once(addr)
            .chain(options.also_listen.iter().copied())
            .map(|a| format!("{a}@{port}"))
            .collect();
        let listen = listen.join(", ");
        let mut text = String::new();
        if let Some((rate, slip)) = options.rrl {
            let _ = write!(
                text,
                "mod-rrl:\n  - id: lab\n    rate-limit: {rate}\n    slip: {slip}\n"
            );
        }
        let _ = write!(
            text,
            "server:\n    rundir: \"{run}\"\n    listen: [{listen}]\n\
             \x20   udp-workers: 2\n    tcp-workers: 1\n    background-workers: 1\n\
             database:\n    storage: \"{db}\"\n\
             log:\n  - target: stderr\n    any: warning\n",
            run = dir.join("run").display(),
            db = dir.join("db").display(),
        );
        let mut peers: Vec<Ipv4Addr> = zones
            .iter()
            .flat_map(|z| z.primary.iter().chain(&z.secondaries).copied())
            .collect();
        peers.sort();
        peers.dedup();
        let mut acls = String::new();
        if !peers.is_empty() {
            text.push_str("remote:\n");
            for p in &peers {
                // `via`: the kernel would pick 127.0.0.1 as the source, which the peer's ACL
                // (by address) refuses.
                let _ = writeln!(
                    text,
                    "  - id: r{}\n    address: {p}@{port}\n    via: {addr}",
                    p.octets()[3]
                );
            }
            for p in &peers {
                let _ = writeln!(
                    acls,
                    "  - id: a{}\n    address: {p}\n    action: [transfer, notify]",
                    p.octets()[3]
                );
            }
        }
        for (i, u) in options.update_from.iter().enumerate() {
            let _ = writeln!(acls, "  - id: u{i}\n    address: {u}\n    action: update");
        }
        if !acls.is_empty() {
            text.push_str("acl:\n");
            text.push_str(&acls);
        }
        let _ = write!(
            text,
            "policy:\n  - id: manual\n    manual: on\n\
             \x20 - id: auto\n    algorithm: ecdsap256sha256\n    single-type-signing: on\n\
             \x20   dnskey-ttl: 2\n    zone-max-ttl: 2\n    propagation-delay: 0\n\
             template:\n  - id: default\n    storage: \"{dir}\"\n    semantic-checks: off\n{rrl}\
             \x20   journal-content: none\n    zonefile-sync: -1\n    zonefile-load: whole\n\
             zone:\n",
            dir = dir.display(),
            rrl = if options.rrl.is_some() {
                "    global-module: mod-rrl/lab\n"
            } else {
                ""
            },
        );
        let mut serials = HashMap::new();
        for z in zones {
            let _ = writeln!(
                text,
                "  - domain: \"{}\"\n    file: \"{}\"",
                z.name,
                file_name(&z.name)
            );
            match z.signing {
                Signing::Off => {}
                Signing::Manual => {
                    text.push_str("    dnssec-signing: on\n    dnssec-policy: manual\n")
                }
                Signing::Auto => text.push_str("    dnssec-signing: on\n    dnssec-policy: auto\n"),
            }
            let mut acl_ids: Vec<String> = Vec::new();
            if let Some(p) = z.primary {
                let _ = writeln!(text, "    master: r{}", p.octets()[3]);
                acl_ids.push(format!("a{}", p.octets()[3]));
            }
            if !z.secondaries.is_empty() {
                let ids: Vec<String> = z
                    .secondaries
                    .iter()
                    .map(|p| format!("r{}", p.octets()[3]))
                    .collect();
                acl_ids.extend(z.secondaries.iter().map(|p| format!("a{}", p.octets()[3])));
                let _ = writeln!(text, "    notify: [{}]", ids.join(", "));
            }
            if z.primary.is_none() {
                acl_ids.extend(
                    options
                        .update_from
                        .iter()
                        .enumerate()
                        .map(|(i, _)| format!("u{i}")),
                );
            }
            if !acl_ids.is_empty() {
                let _ = writeln!(text, "    acl: [{}]", acl_ids.join(", "));
            }
            if let Some(body) = &z.text {
                let serial = serial_now();
                std::fs::write(dir.join(file_name(&z.name)), with_serial(body, serial))
                    .map_err(io)?;
                serials.insert(z.name.clone(), serial);
            }
        }
        let conf = dir.join("knot.conf");
        std::fs::write(&conf, text).map_err(io)?;
        Ok(Self {
            addr,
            port,
            dir: dir.to_path_buf(),
            conf,
            proc: None,
            serials: Mutex::new(serials),
        })
    }

    pub fn socket(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.addr), self.port)
    }

    pub fn start(&mut self) -> Result<()> {
        let log = std::fs::File::create(self.dir.join("knotd.log")).map_err(|e| e.to_string())?;
        let proc = Proc::spawn(
            &format!("knotd {}", self.addr),
            Command::new("knotd")
                .arg("-c")
                .arg(&self.conf)
                .stdout(Stdio::null())
                .stderr(log),
        )?;
        self.proc = Some(proc);
        Ok(())
    }

    /// knotd's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(Proc::pid)
    }

    pub fn stop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    /// The server's log so far (warnings and errors), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("knotd.log")).unwrap_or_default()
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<String> {
        let out = Command::new(program)
            .arg("-c")
            .arg(&self.conf)
            .args(args)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() || stdout.contains("error:") {
            return Err(format!(
                "{program} {args:?} at {}: {stdout}{}",
                self.addr,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(stdout)
    }

    pub fn knotc(&self, args: &[&str]) -> Result<String> {
        self.run("knotc", args)
    }

    pub fn keymgr(&self, args: &[&str]) -> Result<String> {
        self.run("keymgr", args)
    }

    /// A CSK for `zone` (policy `manual`); returns its SHA-256 DS rdata (`tag 13 2 HEX`).
    pub fn generate_csk(&self, zone: &str) -> Result<String> {
        self.keymgr(&[zone, "generate", "algorithm=13", "ksk=yes", "zsk=yes"])?;
        self.ds(zone)?
            .ok_or_else(|| format!("keymgr made no key for {zone}"))
    }

    /// The zone's keys as `keymgr ZONE dnskey` prints them (`zone. DNSKEY …` lines).
    pub fn dnskey_text(&self, zone: &str) -> Result<String> {
        self.keymgr(&[zone, "dnskey"])
    }

    /// Publishes another signer's keys (`dnskey_text` of that server) in `zone`'s DNSKEY
    /// set without signing with them (`keymgr import-pub`): the multi-signer model of
    /// RFC 8901, where every server's DNSKEY set holds every signer's key.
    pub fn import_public_keys(&self, zone: &str, dnskey_text: &str) -> Result<()> {
        for (i, line) in dnskey_text
            .lines()
            .filter(|l| l.contains("DNSKEY"))
            .enumerate()
        {
            let file = self.dir.join(format!("imported-{i}.key"));
            std::fs::write(&file, format!("{line}\n")).map_err(|e| e.to_string())?;
            let path = file.to_string_lossy().into_owned();
            self.keymgr(&[zone, "import-pub", &path])?;
        }
        Ok(())
    }

    /// The SHA-256 DS rdata of the zone's key (`keymgr ZONE ds`), if it has one.
    pub fn ds(&self, zone: &str) -> Result<Option<String>> {
        let text = match self.keymgr(&[zone, "ds"]) {
            Ok(t) => t,
            // keymgr fails for a zone without keys.
            Err(_) => return Ok(None),
        };
        Ok(text
            .lines()
            .find(|l| l.split_whitespace().nth(4) == Some("2"))
            .map(|l| l.split_whitespace().skip(2).collect::<Vec<_>>().join(" ")))
    }

    /// The zone's key-signing key as `keymgr ZONE dnskey` prints it, if it has one.
    pub fn dnskey(&self, zone: &str) -> Result<Option<Dnskey>> {
        let text = match self.keymgr(&[zone, "dnskey"]) {
            Ok(t) => t,
            Err(_) => return Ok(None),
        };
        Ok(text.lines().find_map(parse_dnskey_line))
    }

    /// Rewrites the zone file with a serial above any served so far.
    pub fn write_zone(&self, zone: &str, body: &str) -> Result<u32> {
        let mut serials = self.serials.lock().unwrap_or_else(|p| p.into_inner());
        let last = serials.get(zone).copied().unwrap_or(0);
        // Signing bumps the served serial by one or two; leave room above it.
        let serial = serial_now().max(last.saturating_add(10));
        std::fs::write(self.dir.join(file_name(zone)), with_serial(body, serial))
            .map_err(|e| e.to_string())?;
        serials.insert(zone.into(), serial);
        Ok(serial)
    }

    /// Turns Knot's signing of `zone` on (policy `auto`) or off, after rewriting its file
    /// (so the served serial grows and the secondaries transfer the change).
    pub fn set_signing(&self, zone: &str, body: &str, on: bool) -> Result<()> {
        self.write_zone(zone, body)?;
        let key = format!("zone[{zone}].dnssec-signing");
        self.knotc(&["conf-begin"])?;
        let set = (|| {
            self.knotc(&["conf-set", &key, if on { "on" } else { "off" }])?;
            if on {
                self.knotc(&["conf-set", &format!("zone[{zone}].dnssec-policy"), "auto"])?;
            }
            self.knotc(&["conf-commit"])
        })();
        if set.is_err() {
            let _ = self.knotc(&["conf-abort"]);
        }
        set?;
        // A commit reloads the zone only when its configuration changed.
        self.knotc(&["zone-reload", zone])?;
        Ok(())
    }

    /// A registrar's edit of a zone this server serves: one transaction of `zone-set`
    /// (`("owner", "ttl TYPE rdata")`) and `zone-unset` (`("owner", "TYPE")`).
    pub fn edit(&self, zone: &str, set: &[(&str, &str)], unset: &[(&str, &str)]) -> Result<()> {
        self.knotc(&["zone-begin", zone])?;
        let edit = (|| {
            for (owner, rtype) in unset {
                // Unsetting what is not there is an error to knotc; the goal is its absence.
                let _ = self.knotc(&["zone-unset", zone, owner, rtype]);
            }
            for (owner, rr) in set {
                let mut args = vec!["zone-set", zone, owner];
                args.extend(rr.split_whitespace());
                self.knotc(&args)?;
            }
            self.knotc(&["zone-commit", zone])
        })();
        if edit.is_err() {
            let _ = self.knotc(&["zone-abort", zone]);
        }
        edit.map(drop)
    }
}

impl Drop for Knot {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `$SERIAL` in a zone text becomes the serial.
fn with_serial(body: &str, serial: u32) -> String {
    body.replace("$SERIAL", &serial.to_string())
}

/// `zone. [ttl] DNSKEY 257 3 13 BASE64...` -> the key, for a SEP key only.
pub fn parse_dnskey_line(line: &str) -> Option<Dnskey> {
    use base64::Engine;
    let f: Vec<&str> = line.split_whitespace().collect();
    let at = f.iter().position(|w| *w == "DNSKEY")?;
    let flags: u16 = f.get(at + 1)?.parse().ok()?;
    if flags & 1 == 0 {
        return None;
    }
    Some(Dnskey {
        flags,
        protocol: f.get(at + 2)?.parse().ok()?,
        algorithm: f.get(at + 3)?.parse().ok()?,
        public_key: base64::engine::general_purpose::STANDARD
            .decode(f.get(at + 4..)?.concat())
            .ok()?,
    })
}

/// Waits (bounded) until `server` answers `zone SOA` authoritatively.
pub async fn wait_for_zone(server: SocketAddr, zone: &str, limit: Duration) -> Result<()> {
    let transport = NetTransport::new(Duration::from_millis(200));
    let name = parse_name(zone).ok_or_else(|| format!("bad name {zone}"))?;
    let query = build_query(&name, hickory_proto::rr::RecordType::SOA, false);
    let until = Instant::now() + limit;
    for _ in 0..1000 {
        if let Ok(m) = transport.exchange(server, &query).await
            && m.metadata.authoritative
            && !m.answers.is_empty()
        {
            return Ok(());
        }
        if Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("{server} never served {zone} within {limit:?}"))
}

/// The SOA serial `server` serves for `zone`, if it answers.
pub async fn serial(server: SocketAddr, zone: &str) -> Option<u32> {
    let transport = NetTransport::new(Duration::from_millis(300));
    let query = build_query(
        &parse_name(zone)?,
        hickory_proto::rr::RecordType::SOA,
        false,
    );
    let m = transport.exchange(server, &query).await.ok()?;
    m.answers.iter().find_map(|r| match &r.data {
        hickory_proto::rr::RData::SOA(soa) => Some(soa.serial),
        _ => None,
    })
}

/// How the lab's Unbound caches and validates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnboundOptions {
    /// Answers are cached at most this long (the lab's TTLs are 2 s; a longer one, such as
    /// an old delegation's NS TTL, is then kept that long).
    pub cache_max_ttl: u32,
    /// How often a failed validation is retried with another authority (Unbound's
    /// default 5, which can hide a bogus answer by asking the parent again; 0 fails at
    /// once, as a resolver without that retry would).
    pub val_max_restart: u32,
}

impl Default for UnboundOptions {
    fn default() -> Self {
        Self {
            cache_max_ttl: 2,
            val_max_restart: 5,
        }
    }
}

/// Unbound as a validating resolver with the lab anchor and the given stub zones: the
/// root alone when the lab runs on port 53 (Unbound follows the referrals from there),
/// every zone otherwise (a referral carries no port: Unbound would ask port 53 below the
/// root).
pub struct Unbound {
    pub addr: SocketAddr,
    pub conf: PathBuf,
    proc: Proc,
}

impl Unbound {
    pub async fn start(
        dir: &Path,
        addr: Ipv4Addr,
        port: u16,
        anchor: &Path,
        stubs: &[(&str, Vec<Ipv4Addr>)],
    ) -> Result<Self> {
        Self::start_with(dir, addr, port, anchor, stubs, &UnboundOptions::default()).await
    }

    /// [`Unbound::start`] with [`UnboundOptions`].
    pub async fn start_with(
        dir: &Path,
        addr: Ipv4Addr,
        port: u16,
        anchor: &Path,
        stubs: &[(&str, Vec<Ipv4Addr>)],
        options: &UnboundOptions,
    ) -> Result<Self> {
        let UnboundOptions {
            cache_max_ttl,
            val_max_restart,
        } = *options;
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        // A bogus answer is held 2 s like every other TTL of the lab (Unbound's default,
        // 60 s, would only make a zone repaired in a test wait a minute for the resolver).
        let mut conf = format!(
            "server:\n  interface: {addr}\n  port: {port}\n  do-ip6: no\n\
             \x20 do-not-query-localhost: no\n  username: \"\"\n  chroot: \"\"\n\
             \x20 directory: \"{dir}\"\n  pidfile: \"\"\n  use-syslog: no\n  logfile: \"\"\n\
             \x20 verbosity: 0\n  module-config: \"validator iterator\"\n\
             \x20 trust-anchor-file: \"{anchor}\"\n  ede: yes\n\
             \x20 local-zone: \"test.\" nodefault\n  val-log-level: 2\n\
             \x20 cache-max-ttl: {cache_max_ttl}\n  cache-max-negative-ttl: 2\n  infra-host-ttl: 2\n\
             \x20 val-bogus-ttl: 2\n\
             \x20 val-max-restart: {val_max_restart}\n\
             \x20 access-control: 127.0.0.0/8 allow\n\
             remote-control:\n  control-enable: yes\n  control-use-cert: no\n\
             \x20 control-interface: \"{dir}/unbound.ctl\"\n",
            dir = dir.display(),
            anchor = anchor.display(),
        );
        for (zone, addrs) in stubs {
            let _ = writeln!(conf, "stub-zone:\n  name: \"{zone}\"");
            for a in addrs {
                let _ = writeln!(conf, "  stub-addr: {a}@{port}");
            }
        }
        let path = dir.join("unbound.conf");
        std::fs::write(&path, conf).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("unbound.log")).map_err(|e| e.to_string())?;
        let proc = Proc::spawn(
            "unbound",
            Command::new("unbound")
                .arg("-d")
                .arg("-c")
                .arg(&path)
                .stdout(Stdio::null())
                .stderr(log),
        )?;
        let mut unbound = Self {
            addr: SocketAddr::new(IpAddr::V4(addr), port),
            conf: path,
            proc,
        };
        let transport = NetTransport::new(Duration::from_millis(200));
        let query = build_query(
            &hickory_proto::rr::Name::root(),
            hickory_proto::rr::RecordType::SOA,
            true,
        );
        for _ in 0..50 {
            if !unbound.proc.alive() {
                return Err("unbound exited at start".into());
            }
            if transport.exchange(unbound.addr, &query).await.is_ok() {
                return Ok(unbound);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err("unbound never answered".into())
    }

    /// Forgets what Unbound learnt about `zone` (answers, bogus keys, delegations).
    pub fn flush(&self, zone: &str) -> Result<()> {
        for args in [
            vec!["flush_zone", zone],
            vec!["flush_bogus"],
            vec!["flush_negative"],
            vec!["flush_infra", "all"],
            vec!["flush_requestlist"],
        ] {
            unbound_control(&self.conf, &args)?;
        }
        Ok(())
    }

    /// `(rcode, AD)` of a recursive `name type` query.
    pub async fn ask(
        &self,
        name: &str,
        rtype: hickory_proto::rr::RecordType,
    ) -> Result<(String, bool)> {
        let m = self.query(name, rtype, false).await?;
        Ok((
            m.metadata.response_code.to_string(),
            m.metadata.authentic_data,
        ))
    }

    /// The whole answer to a recursive `name type` query with DO, and CD when
    /// `checking_disabled` (the data even of a bogus zone).
    pub async fn query(
        &self,
        name: &str,
        rtype: hickory_proto::rr::RecordType,
        checking_disabled: bool,
    ) -> Result<hickory_proto::op::Message> {
        let transport = NetTransport::new(Duration::from_secs(2));
        let qname = parse_name(name).ok_or_else(|| format!("bad name {name}"))?;
        let mut query = build_query(&qname, rtype, true);
        query.metadata.checking_disabled = checking_disabled;
        transport
            .exchange(self.addr, &query)
            .await
            .map_err(|e| e.to_string())
    }
}

/// What `unbound-control -c CONF ARGS` does, without the process: the control socket
/// `unbound.ctl` beside the configuration file (certificates off, as every Unbound of
/// the harness has it), the command sent as `UBCT1  ARGS\n` (unbound-control's
/// `go_cmd`), the answer read to its end; an answer starting with `error` fails, as the
/// tool's exit code does. The end-to-end suite flushes caches thousands of times: a
/// process each (with OpenSSL's start-up) was a measurable part of its CPU.
pub fn unbound_control(conf: &Path, args: &[&str]) -> Result<String> {
    use std::io::{Read, Write};
    let socket = conf.with_file_name("unbound.ctl");
    let fail = |e: std::io::Error| format!("unbound-control {args:?} at {}: {e}", socket.display());
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(fail)?;
    stream
        .write_all(format!("UBCT1  {}\n", args.join(" ")).as_bytes())
        .map_err(fail)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).map_err(fail)?;
    if answer.starts_with("error") {
        return Err(format!("unbound-control {args:?}: {answer}"));
    }
    Ok(answer)
}
