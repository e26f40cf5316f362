//! A registry for one TLD that takes DS changes from its children's CDS and CDNSKEY
//! records (RFC 7344, RFC 8078, RFC 9975), as SWITCH's scanner does for .ch and .li, and
//! writes them into the real TLD zone by dynamic UPDATE (RFC 2136).
//!
//! A scan of a child: the delegation's name servers and their addresses from the TLD's
//! primary (glue first); every address asked over TCP (DO=1) for the child's CDS,
//! CDNSKEY and DNSKEY with their signatures. Every address must answer, and all must
//! serve the same CDS and CDNSKEY sets, or nothing is done. The signatures are checked
//! with the lab's own arithmetic ([`crate::dnssec`]): the DNSKEY RRset signed by one of
//! its keys, the CDS/CDNSKEY RRset by a key of that set; a change or a delete of a DS by
//! a key the current DS names; a first DS (bootstrap) only for a CDS that names a key
//! signing the DNSKEY RRset, seen unchanged for `bootstrap_period`. Then the child's DS
//! RRset is replaced (or deleted) at every TLD primary that differs.
//!
//! Scans run every `scan_interval` over every managed child, and at once on a NOTIFY
//! (RFC 9859: `child. CDS` or `CDNSKEY`) to its UDP or TCP socket. What it did is kept
//! as [`RegistryEvent`]s for the tests.

pub mod msg;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::dnssec::{
    DigestType, Dnskey, DnssecError, Ds, Rrsig, SigLimits, SignedRrset, fqdn, hex_upper,
    name_to_wire, verified_signers,
};
use msg::{
    CLASS_IN, Message, OPCODE_NOTIFY, OPCODE_UPDATE, RCODE_FORMERR, RCODE_NOERROR, RCODE_NOTAUTH,
    RCODE_REFUSED, TYPE_A, TYPE_AAAA, TYPE_CDNSKEY, TYPE_CDS, TYPE_DNSKEY, TYPE_DS, TYPE_NS,
};

/// The DSYNC record's type code (RFC 9859).
pub const TYPE_DSYNC: u16 = 66;
/// DSYNC scheme 1: send a NOTIFY to the target (RFC 9859 section 2).
pub const DSYNC_SCHEME_NOTIFY: u8 = 1;

/// The DSYNC RDATA in RFC 3597's generic form (`\# <len> <hex>`), the only form Knot 3.2
/// reads it in: RRtype, scheme, port, target name uncompressed.
pub fn dsync_generic_rdata(
    rrtype: u16,
    scheme: u8,
    port: u16,
    target: &str,
) -> Result<String, DnssecError> {
    let mut rdata = rrtype.to_be_bytes().to_vec();
    rdata.push(scheme);
    rdata.extend_from_slice(&port.to_be_bytes());
    rdata.extend_from_slice(&name_to_wire(target)?);
    Ok(format!("\\# {} {}", rdata.len(), hex_upper(&rdata)))
}

/// `*._dsync.<tld> <ttl> TYPE66 \# …`: every child of `tld` is told to NOTIFY its CDS to
/// `target`'s `port`.
pub fn dsync_record(tld: &str, ttl: u32, port: u16, target: &str) -> Result<String, DnssecError> {
    let tld = fqdn(tld)?;
    let rdata = dsync_generic_rdata(TYPE_CDS, DSYNC_SCHEME_NOTIFY, port, target)?;
    Ok(format!("*._dsync.{tld} {ttl} TYPE{TYPE_DSYNC} {rdata}"))
}

/// How much one scan may cost, whatever the child serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Name servers of one delegation looked at.
    pub name_servers: usize,
    /// Addresses of one delegation asked.
    pub addresses: usize,
    /// Records of one RRset (DNSKEY, CDS, CDNSKEY, DS).
    pub records: usize,
    /// Signatures and keys tried per RRset.
    pub signatures: SigLimits,
    /// One exchange with one server.
    pub query_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            name_servers: 8,
            addresses: 8,
            records: 16,
            signatures: SigLimits::default(),
            query_timeout: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// The TLD this registry runs, e.g. `test.`.
    pub tld: String,
    /// The TLD's primaries: the delegation and the current DS are read from the first;
    /// every one whose DS differs gets the UPDATE.
    pub primaries: Vec<SocketAddr>,
    /// The registry's own address: queries and UPDATEs come from it (the primaries' ACL
    /// names it), and the NOTIFY sockets listen on it.
    pub source: IpAddr,
    /// The port the children's name servers answer on.
    pub child_port: u16,
    /// The NOTIFY sockets' port (UDP and TCP); `None`: no NOTIFY, periodic scans only.
    pub notify_port: Option<u16>,
    /// The delegations the registry manages.
    pub children: Vec<String>,
    /// How long a first DS's CDS must be seen unchanged and consistent.
    pub bootstrap_period: Duration,
    pub scan_interval: Duration,
    /// The TTL of the DS records published.
    pub ds_ttl: u32,
    pub limits: Limits,
}

impl RegistryConfig {
    pub fn new(tld: &str, primaries: Vec<SocketAddr>, source: IpAddr, child_port: u16) -> Self {
        Self {
            tld: tld.into(),
            primaries,
            source,
            child_port,
            notify_port: None,
            children: Vec::new(),
            bootstrap_period: Duration::from_secs(3 * 86_400),
            scan_interval: Duration::from_secs(3600),
            ds_ttl: 3600,
            limits: Limits::default(),
        }
    }
}

/// What a scan came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// Nothing to do, and why (no CDS; the CDS is the DS already; a delete without DS).
    Scanned(String),
    /// The DS RRset replaced by these records (`child. TTL IN DS …` lines).
    Published(Vec<String>),
    /// The DS RRset deleted (RFC 8078 delete).
    Removed,
    /// No change, and why: a server failing or differing, a signature missing, a
    /// bootstrap still waiting.
    Refused(String),
    /// A change decided but an UPDATE not accepted.
    UpdateFailed(String),
}

impl fmt::Display for What {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Scanned(why) => write!(f, "scanned: {why}"),
            Self::Published(lines) => write!(f, "published: {}", lines.join("; ")),
            Self::Removed => write!(f, "removed the DS"),
            Self::Refused(why) => write!(f, "refused: {why}"),
            Self::UpdateFailed(why) => write!(f, "update failed: {why}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEvent {
    pub at: SystemTime,
    pub child: String,
    pub what: What,
}

impl fmt::Display for RegistryEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}",
            crate::timefmt::rfc3339(self.at),
            self.child,
            self.what
        )
    }
}

/// Events kept at most; the oldest go first.
const MAX_EVENTS: usize = 10_000;
/// Scans waiting for the worker at most (NOTIFYs beyond wait for the periodic scan).
const QUEUE: usize = 64;
/// TCP connections to the NOTIFY socket served at once.
const MAX_CONNECTIONS: usize = 16;

struct Inner {
    config: RegistryConfig,
    tld_wire: Vec<u8>,
    /// The managed children, by their names in wire form.
    children: Vec<(String, Vec<u8>)>,
    events: Mutex<Vec<RegistryEvent>>,
    /// A bootstrap's CDS and since when it has been seen unchanged, by child.
    bootstrap: Mutex<HashMap<String, (Vec<Ds>, SystemTime)>>,
    /// Children a NOTIFY queued a scan for, not yet taken by the worker.
    pending: Mutex<HashSet<String>>,
    /// One scan at a time: the bootstrap clock and the UPDATEs see one order.
    scanning: tokio::sync::Mutex<()>,
    scans: AtomicU64,
    notifies: AtomicU64,
    notifies_refused: AtomicU64,
    updates: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The running registry; dropping it stops its scans and its NOTIFY sockets.
pub struct Registry {
    inner: Arc<Inner>,
    tasks: JoinSet<()>,
    notify_addr: Option<SocketAddr>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("tld", &self.inner.config.tld)
            .field("notify_addr", &self.notify_addr)
            .finish()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.tasks.abort_all();
    }
}

impl Registry {
    /// Binds the NOTIFY sockets (if configured) and starts the periodic scans; the first
    /// pass starts at once.
    pub async fn start(config: RegistryConfig) -> std::io::Result<Self> {
        let bad = |e: DnssecError| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let tld = fqdn(&config.tld).map_err(bad)?;
        let tld_wire = name_to_wire(&tld).map_err(bad)?;
        if config.primaries.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a registry needs a TLD primary",
            ));
        }
        let mut children = Vec::new();
        for c in &config.children {
            let name = fqdn(c).map_err(bad)?;
            let wire = name_to_wire(&name).map_err(bad)?;
            children.push((name, wire));
        }
        let inner = Arc::new(Inner {
            config: RegistryConfig { tld, ..config },
            tld_wire,
            children,
            events: Mutex::default(),
            bootstrap: Mutex::default(),
            pending: Mutex::default(),
            scanning: tokio::sync::Mutex::new(()),
            scans: AtomicU64::new(0),
            notifies: AtomicU64::new(0),
            notifies_refused: AtomicU64::new(0),
            updates: AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::channel::<String>(QUEUE);
        let mut tasks = JoinSet::new();
        let mut notify_addr = None;
        if let Some(port) = inner.config.notify_port {
            let (udp, tcp) = bind_notify(SocketAddr::new(inner.config.source, port)).await?;
            let addr = udp.local_addr()?;
            notify_addr = Some(addr);
            let (i, t) = (inner.clone(), tx.clone());
            tasks.spawn(async move { serve_udp(udp, i, t).await });
            let (i, t) = (inner.clone(), tx);
            tasks.spawn(async move { serve_tcp(tcp, i, t).await });
        }
        let worker = inner.clone();
        tasks.spawn(async move { work(worker, rx).await });
        Ok(Self {
            inner,
            tasks,
            notify_addr,
        })
    }

    /// Where NOTIFYs are taken (UDP and TCP), when they are.
    pub fn notify_addr(&self) -> Option<SocketAddr> {
        self.notify_addr
    }

    pub fn events(&self) -> Vec<RegistryEvent> {
        lock(&self.inner.events).clone()
    }

    /// The events of one child, as text, for failure messages.
    pub fn story(&self, child: &str) -> String {
        let child = fqdn(child).unwrap_or_else(|_| child.to_string());
        self.events()
            .iter()
            .filter(|e| e.child == child)
            .map(|e| format!("{e}\n"))
            .collect()
    }

    /// Scans done (periodic, on NOTIFY, or asked for).
    pub fn scans(&self) -> u64 {
        self.inner.scans.load(Ordering::SeqCst)
    }

    /// NOTIFYs accepted (a managed child's CDS or CDNSKEY).
    pub fn notifies(&self) -> u64 {
        self.inner.notifies.load(Ordering::SeqCst)
    }

    /// Messages to the NOTIFY sockets refused or dropped.
    pub fn notifies_refused(&self) -> u64 {
        self.inner.notifies_refused.load(Ordering::SeqCst)
    }

    /// UPDATEs the primaries accepted.
    pub fn updates(&self) -> u64 {
        self.inner.updates.load(Ordering::SeqCst)
    }

    /// Scans `child` now (after any scan under way); what it came to, also recorded.
    pub async fn scan(&self, child: &str) -> What {
        self.inner.scan(child).await
    }
}

/// The NOTIFY sockets, UDP and TCP on one port. Port 0: the port the kernel picks for UDP
/// may be taken for TCP (by another test's connection, say), so another is tried.
async fn bind_notify(at: SocketAddr) -> std::io::Result<(UdpSocket, TcpListener)> {
    const TRIES: u32 = 20;
    let mut last = None;
    for _ in 0..TRIES {
        let udp = UdpSocket::bind(at).await?;
        match TcpListener::bind(udp.local_addr()?).await {
            Ok(tcp) => return Ok((udp, tcp)),
            Err(e) if at.port() == 0 && e.kind() == std::io::ErrorKind::AddrInUse => {
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no port for the NOTIFY sockets")))
}

/// The periodic passes and the NOTIFY queue, one scan at a time.
async fn work(inner: Arc<Inner>, mut rx: mpsc::Receiver<String>) {
    let mut tick =
        tokio::time::interval(inner.config.scan_interval.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Without NOTIFY sockets nobody sends: the periodic passes go on alone.
    let mut open = true;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let children: Vec<String> = inner.children.iter().map(|(n, _)| n.clone()).collect();
                for child in children {
                    inner.scan(&child).await;
                }
            }
            queued = rx.recv(), if open => {
                let Some(child) = queued else {
                    open = false;
                    continue;
                };
                lock(&inner.pending).remove(&child);
                inner.scan(&child).await;
            }
        }
    }
}

/// What one child address serves.
#[derive(Debug, Default)]
struct ChildView {
    cds: Vec<Vec<u8>>,
    cds_sigs: Vec<Rrsig>,
    cdnskey: Vec<Vec<u8>>,
    cdnskey_sigs: Vec<Rrsig>,
    dnskey: Vec<Vec<u8>>,
    dnskey_sigs: Vec<Rrsig>,
}

fn now_secs() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or_default()
}

fn sorted(mut set: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    set.sort();
    set.dedup();
    set
}

fn same_ds(a: &[Ds], b: &[Ds]) -> bool {
    sorted(a.iter().map(Ds::rdata).collect()) == sorted(b.iter().map(Ds::rdata).collect())
}

fn show_cds(set: &[Vec<u8>]) -> String {
    if set.is_empty() {
        return "none".into();
    }
    set.iter()
        .map(|r| Ds::from_rdata(r).map_or_else(|| "malformed".into(), |d| d.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn show_cdnskey(set: &[Vec<u8>]) -> String {
    if set.is_empty() {
        return "none".into();
    }
    set.iter()
        .map(|r| {
            Dnskey::from_rdata(r).map_or_else(
                || "malformed".into(),
                |k| {
                    format!(
                        "{} {} {} (tag {})",
                        k.flags,
                        k.protocol,
                        k.algorithm,
                        k.key_tag()
                    )
                },
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Inner {
    async fn scan(&self, child: &str) -> What {
        let _one = self.scanning.lock().await;
        self.scans.fetch_add(1, Ordering::SeqCst);
        let name = fqdn(child).unwrap_or_else(|_| child.to_string());
        let (what, keep_clock) = match self.scan_child(&name).await {
            Ok(done) => done,
            Err(why) => (What::Refused(why), false),
        };
        if !keep_clock {
            lock(&self.bootstrap).remove(&name);
        }
        let mut events = lock(&self.events);
        if events.len() >= MAX_EVENTS {
            events.remove(0);
        }
        events.push(RegistryEvent {
            at: SystemTime::now(),
            child: name,
            what: what.clone(),
        });
        what
    }

    async fn ask(&self, server: SocketAddr, name: &[u8], qtype: u16) -> Result<Message, String> {
        msg::ask(
            self.config.source,
            server,
            name,
            qtype,
            self.config.limits.query_timeout,
        )
        .await
    }

    /// The DS RRset `primary` serves for the child.
    async fn ds_at(&self, primary: SocketAddr, child: &[u8]) -> Result<Vec<Ds>, String> {
        let m = self
            .ask(primary, child, TYPE_DS)
            .await
            .map_err(|e| format!("the TLD's {primary}: DS: {e}"))?;
        if m.rcode() != RCODE_NOERROR {
            return Err(format!(
                "the TLD's {primary} answers DS with {}",
                msg::rcode_name(m.rcode())
            ));
        }
        let set = m.rrset(child, TYPE_DS);
        if set.len() > self.config.limits.records {
            return Err(format!(
                "the TLD's {primary} serves more than {} DS",
                self.config.limits.records
            ));
        }
        set.iter()
            .map(|r| {
                Ds::from_rdata(r)
                    .ok_or_else(|| format!("the TLD's {primary} serves a malformed DS"))
            })
            .collect()
    }

    /// The delegation's addresses, from the TLD's first primary (glue, else its A/AAAA).
    async fn child_addresses(&self, child: &[u8]) -> Result<Vec<IpAddr>, String> {
        let limits = self.config.limits;
        let primary = *self
            .config
            .primaries
            .first()
            .ok_or("the registry has no TLD primary")?;
        let m = self
            .ask(primary, child, TYPE_NS)
            .await
            .map_err(|e| format!("the TLD's {primary}: NS: {e}"))?;
        if m.rcode() != RCODE_NOERROR {
            return Err(format!(
                "the TLD's {primary} answers NS with {}",
                msg::rcode_name(m.rcode())
            ));
        }
        let mut targets: Vec<Vec<u8>> = m
            .authority
            .iter()
            .chain(&m.answers)
            .filter(|r| r.owner == child && r.rtype == TYPE_NS)
            .filter_map(|r| r.target.clone())
            .collect();
        targets.sort();
        targets.dedup();
        if targets.is_empty() {
            return Err("not delegated at the TLD".into());
        }
        if targets.len() > limits.name_servers {
            return Err(format!("more than {} name servers", limits.name_servers));
        }
        let mut addresses: Vec<IpAddr> = Vec::new();
        for target in &targets {
            let mut found: Vec<IpAddr> = m
                .additional
                .iter()
                .filter_map(|r| address_of(r, target))
                .collect();
            if found.is_empty() && msg::name_text(target).ends_with(&self.config.tld) {
                for qtype in [TYPE_A, TYPE_AAAA] {
                    if let Ok(a) = self.ask(primary, target, qtype).await {
                        found.extend(a.answers.iter().filter_map(|r| address_of(r, target)));
                    }
                }
            }
            for a in found {
                if !addresses.contains(&a) {
                    addresses.push(a);
                }
            }
        }
        if addresses.is_empty() {
            return Err("no address for the name servers".into());
        }
        if addresses.len() > limits.addresses {
            return Err(format!(
                "more than {} name-server addresses",
                limits.addresses
            ));
        }
        Ok(addresses)
    }

    /// One scan; the outcome and whether a bootstrap's clock keeps running.
    async fn scan_child(&self, child: &str) -> Result<(What, bool), String> {
        let child_wire = name_to_wire(child).map_err(|e| e.to_string())?;
        let Some((_, managed)) = self.children.iter().find(|(_, w)| *w == child_wire) else {
            return Err("not a delegation this registry manages".into());
        };
        let child_wire = managed.clone();
        let limits = self.config.limits;

        let addresses = self.child_addresses(&child_wire).await?;
        let mut current_at = Vec::new();
        for p in &self.config.primaries {
            current_at.push((*p, self.ds_at(*p, &child_wire).await?));
        }
        let current = current_at
            .first()
            .map(|(_, ds)| ds.clone())
            .unwrap_or_default();

        // Every address, at once; every one must answer.
        let mut asks = JoinSet::new();
        for ip in &addresses {
            let addr = SocketAddr::new(*ip, self.config.child_port);
            let me = ScanCtx {
                source: self.config.source,
                timeout: limits.query_timeout,
                limits,
            };
            let child_wire = child_wire.clone();
            asks.spawn(async move { (addr, me.view(addr, &child_wire).await) });
        }
        let mut views: Vec<(SocketAddr, ChildView)> = Vec::new();
        while let Some(joined) = asks.join_next().await {
            let (addr, view) = joined.map_err(|e| format!("a query task failed: {e}"))?;
            views.push((addr, view.map_err(|e| format!("{}: {e}", addr.ip()))?));
        }
        views.sort_by_key(|(a, _)| *a);
        let Some((first_addr, first)) = views.first() else {
            return Err("no address answered".into());
        };
        for (addr, view) in &views[1..] {
            if view.cds != first.cds {
                return Err(format!(
                    "inconsistent: {} serves CDS {}, {} serves {}",
                    addr.ip(),
                    show_cds(&view.cds),
                    first_addr.ip(),
                    show_cds(&first.cds)
                ));
            }
            if view.cdnskey != first.cdnskey {
                return Err(format!(
                    "inconsistent: {} serves CDNSKEY {}, {} serves {}",
                    addr.ip(),
                    show_cdnskey(&view.cdnskey),
                    first_addr.ip(),
                    show_cdnskey(&first.cdnskey)
                ));
            }
        }

        let cds: Vec<Ds> = first
            .cds
            .iter()
            .map(|r| Ds::from_rdata(r).ok_or("a malformed CDS"))
            .collect::<Result<_, _>>()?;
        let cdnskey: Vec<Dnskey> = first
            .cdnskey
            .iter()
            .map(|r| Dnskey::from_rdata(r).ok_or("a malformed CDNSKEY"))
            .collect::<Result<_, _>>()?;
        if cds.is_empty() && cdnskey.is_empty() {
            return Ok((What::Scanned("no CDS or CDNSKEY".into()), false));
        }
        let desired = desired_ds(child, &cds, &cdnskey)?;
        let delete = desired.is_none();
        let desired = desired.unwrap_or_default();
        if delete && current.is_empty() {
            return Ok((
                What::Scanned("a CDS delete, and no DS to delete".into()),
                false,
            ));
        }
        let stale: Vec<SocketAddr> = current_at
            .iter()
            .filter(|(_, ds)| !same_ds(ds, &desired))
            .map(|(p, _)| *p)
            .collect();
        if stale.is_empty() {
            return Ok((What::Scanned("the CDS is the DS already".into()), false));
        }

        let now = now_secs();
        for (addr, view) in &views {
            validate(
                child,
                view,
                &desired,
                &current,
                delete,
                now,
                limits.signatures,
            )
            .map_err(|e| format!("{}: {e}", addr.ip()))?;
        }

        if current.is_empty() {
            let period = self.config.bootstrap_period;
            let seen = SystemTime::now();
            let since = {
                let mut clocks = lock(&self.bootstrap);
                match clocks.get(child) {
                    Some((cds, since)) if same_ds(cds, &desired) => *since,
                    _ => {
                        clocks.insert(child.to_string(), (desired.clone(), seen));
                        seen
                    }
                }
            };
            if seen.duration_since(since).unwrap_or_default() < period {
                return Ok((
                    What::Refused(format!(
                        "bootstrap: consistent since {}, needs {period:?}",
                        crate::timefmt::rfc3339(since)
                    )),
                    true,
                ));
            }
        }

        let mut failures = Vec::new();
        for primary in stale {
            if let Err(e) = self.update(primary, &child_wire, &desired).await {
                failures.push(format!("{primary}: {e}"));
            }
        }
        if !failures.is_empty() {
            return Ok((What::UpdateFailed(failures.join("; ")), false));
        }
        Ok((
            if delete {
                What::Removed
            } else {
                What::Published(
                    desired
                        .iter()
                        .map(|ds| format!("{child} {} IN DS {ds}", self.config.ds_ttl))
                        .collect(),
                )
            },
            false,
        ))
    }

    /// Replaces the child's DS RRset at `primary` with `ds` (none: deletes it).
    async fn update(&self, primary: SocketAddr, child: &[u8], ds: &[Ds]) -> Result<(), String> {
        let id = fastrand::u16(..);
        let rdatas: Vec<Vec<u8>> = ds.iter().map(Ds::rdata).collect();
        let request = msg::update_ds(id, &self.tld_wire, child, self.config.ds_ttl, &rdatas)
            .ok_or("an UPDATE too large")?;
        let bytes = msg::exchange_tcp(
            self.config.source,
            primary,
            &request,
            self.config.limits.query_timeout,
        )
        .await?;
        let m = msg::parse(&bytes).ok_or("a malformed answer to the UPDATE")?;
        if m.id != id || !m.is_response() || m.opcode() != OPCODE_UPDATE {
            return Err("an answer to another message".into());
        }
        if m.rcode() != RCODE_NOERROR {
            return Err(format!("UPDATE answered {}", msg::rcode_name(m.rcode())));
        }
        self.updates.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// The answer to a message at the NOTIFY socket; `None` to drop it.
    fn on_notify(&self, bytes: &[u8], queue: &mpsc::Sender<String>) -> Option<Vec<u8>> {
        let header = match bytes.get(..4) {
            Some(h) if bytes.len() >= 12 && h[2] & 0x80 == 0 => h,
            _ => {
                // Too short to be a request, or a response: never answered.
                self.notifies_refused.fetch_add(1, Ordering::SeqCst);
                return None;
            }
        };
        let id = u16::from_be_bytes([header[0], header[1]]);
        let flags = u16::from_be_bytes([header[2], header[3]]);
        let refuse = |rcode: u8, question: &[u8]| {
            self.notifies_refused.fetch_add(1, Ordering::SeqCst);
            Some(msg::answer(id, flags, rcode, false, question))
        };
        let Some(m) = msg::parse(bytes) else {
            return refuse(RCODE_FORMERR, &[]);
        };
        let Some((qname, qtype, qclass)) = m.question.clone() else {
            return refuse(RCODE_FORMERR, &[]);
        };
        let mut question = qname.clone();
        question.extend_from_slice(&qtype.to_be_bytes());
        question.extend_from_slice(&qclass.to_be_bytes());
        if m.opcode() != OPCODE_NOTIFY {
            return refuse(RCODE_REFUSED, &question);
        }
        if qclass != CLASS_IN || !(qtype == TYPE_CDS || qtype == TYPE_CDNSKEY) {
            return refuse(RCODE_REFUSED, &question);
        }
        let Some((child, _)) = self.children.iter().find(|(_, w)| *w == qname) else {
            return refuse(RCODE_NOTAUTH, &question);
        };
        self.notifies.fetch_add(1, Ordering::SeqCst);
        // Coalesced: a child already queued is not queued again; a full queue leaves it
        // to the periodic scan.
        let queued = lock(&self.pending).insert(child.clone());
        if queued && queue.try_send(child.clone()).is_err() {
            lock(&self.pending).remove(child);
        }
        Some(msg::answer(id, flags, RCODE_NOERROR, true, &question))
    }
}

/// What a child-address query task needs, without the registry's state.
#[derive(Clone, Copy)]
struct ScanCtx {
    source: IpAddr,
    timeout: Duration,
    limits: Limits,
}

impl ScanCtx {
    /// CDS, CDNSKEY and DNSKEY with their signatures from one child address.
    async fn view(&self, addr: SocketAddr, child: &[u8]) -> Result<ChildView, String> {
        let limits = self.limits;
        let mut view = ChildView::default();
        for qtype in [TYPE_CDS, TYPE_CDNSKEY, TYPE_DNSKEY] {
            let name = msg::type_name(qtype);
            let m = msg::ask(self.source, addr, child, qtype, self.timeout)
                .await
                .map_err(|e| format!("{name}: {e}"))?;
            if m.rcode() != RCODE_NOERROR {
                return Err(format!(
                    "answers {name} with {}",
                    msg::rcode_name(m.rcode())
                ));
            }
            if !m.authoritative() {
                return Err(format!("answers {name} without authority"));
            }
            let set = sorted(m.rrset(child, qtype));
            if set.len() > limits.records {
                return Err(format!(
                    "serves more than {} {name} records",
                    limits.records
                ));
            }
            let sigs: Vec<Rrsig> = m
                .rrsigs(child, qtype)
                .iter()
                .filter_map(|r| Rrsig::from_rdata(r))
                .take(limits.signatures.signatures)
                .collect();
            match qtype {
                TYPE_CDS => (view.cds, view.cds_sigs) = (set, sigs),
                TYPE_CDNSKEY => (view.cdnskey, view.cdnskey_sigs) = (set, sigs),
                _ => (view.dnskey, view.dnskey_sigs) = (set, sigs),
            }
        }
        Ok(view)
    }
}

fn address_of(rr: &msg::Rr, owner: &[u8]) -> Option<IpAddr> {
    if rr.owner != owner || rr.class != CLASS_IN {
        return None;
    }
    match (rr.rtype, rr.rdata.len()) {
        (TYPE_A, 4) => <[u8; 4]>::try_from(rr.rdata.as_slice())
            .ok()
            .map(IpAddr::from),
        (TYPE_AAAA, 16) => <[u8; 16]>::try_from(rr.rdata.as_slice())
            .ok()
            .map(IpAddr::from),
        _ => None,
    }
}

/// The DS set the child asks for; `None` for an RFC 8078 delete.
fn desired_ds(child: &str, cds: &[Ds], cdnskey: &[Dnskey]) -> Result<Option<Vec<Ds>>, String> {
    let cds_delete = cds.iter().any(Ds::is_delete);
    let key_delete = cdnskey.iter().any(Dnskey::is_delete);
    if cds_delete && cds.len() > 1 {
        return Err("a CDS delete beside other CDS records".into());
    }
    if key_delete && cdnskey.len() > 1 {
        return Err("a CDNSKEY delete beside other CDNSKEY records".into());
    }
    if (!cds.is_empty() && !cdnskey.is_empty()) && cds_delete != key_delete {
        return Err("the CDS and the CDNSKEY disagree on a delete".into());
    }
    if cds_delete || key_delete {
        return Ok(None);
    }
    if cds.is_empty() {
        return cdnskey
            .iter()
            .map(|k| {
                if !k.is_zone_key() {
                    return Err(format!(
                        "a CDNSKEY (tag {}) without the zone-key flag",
                        k.key_tag()
                    ));
                }
                k.to_ds(child, DigestType::Sha256)
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some);
    }
    // Both: every CDS names a CDNSKEY, every CDNSKEY is named (RFC 7344 section 4).
    if !cdnskey.is_empty() {
        let named = |k: &Dnskey| cds.iter().any(|d| k.matches_ds(child, d));
        let agree = cdnskey.iter().all(named)
            && cds
                .iter()
                .all(|d| cdnskey.iter().any(|k| k.matches_ds(child, d)));
        if !agree {
            return Err("the CDS and the CDNSKEY name different keys".into());
        }
    }
    let mut out: Vec<Ds> = Vec::new();
    for d in cds {
        if !out.contains(d) {
            out.push(d.clone());
        }
    }
    Ok(Some(out))
}

/// The rules for one address's answers (RFC 7344 section 4.1, RFC 8078, RFC 9975).
fn validate(
    child: &str,
    view: &ChildView,
    desired: &[Ds],
    current: &[Ds],
    delete: bool,
    now: u32,
    limits: SigLimits,
) -> Result<(), String> {
    let keys: Vec<Dnskey> = view
        .dnskey
        .iter()
        .map(|r| Dnskey::from_rdata(r).ok_or("a malformed DNSKEY"))
        .collect::<Result<_, _>>()?;
    if keys.is_empty() {
        return Err("no DNSKEY".into());
    }
    let key_signers = verified_signers(
        &SignedRrset {
            owner: child,
            rtype: TYPE_DNSKEY,
            rdatas: &view.dnskey,
            sigs: &view.dnskey_sigs,
        },
        &keys,
        child,
        now,
        limits,
    );
    if key_signers.is_empty() {
        return Err("the DNSKEY RRset is not signed by a key of its own".into());
    }
    for (rtype, set, sigs) in [
        (TYPE_CDS, &view.cds, &view.cds_sigs),
        (TYPE_CDNSKEY, &view.cdnskey, &view.cdnskey_sigs),
    ] {
        if set.is_empty() {
            continue;
        }
        let name = msg::type_name(rtype);
        let rrset = SignedRrset {
            owner: child,
            rtype,
            rdatas: set,
            sigs,
        };
        let signers = verified_signers(&rrset, &keys, child, now, limits);
        if signers.is_empty() {
            return Err(format!(
                "the {name} RRset is not signed by a key of the DNSKEY RRset"
            ));
        }
        if !current.is_empty()
            && !signers
                .iter()
                .any(|k| current.iter().any(|ds| k.matches_ds(child, ds)))
        {
            return Err(format!(
                "the {name} RRset is not signed by a key the DS names"
            ));
        }
    }
    if !delete
        && !desired
            .iter()
            .any(|ds| key_signers.iter().any(|k| k.matches_ds(child, ds)))
    {
        return Err(if current.is_empty() {
            "bootstrap: the CDS names no key that signs the DNSKEY RRset".into()
        } else {
            "the new DS names no key that signs the DNSKEY RRset".into()
        });
    }
    Ok(())
}

async fn serve_udp(socket: UdpSocket, inner: Arc<Inner>, queue: mpsc::Sender<String>) {
    let mut buf = vec![0u8; 4096];
    loop {
        let Ok((len, peer)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        if let Some(answer) = buf.get(..len).and_then(|m| inner.on_notify(m, &queue)) {
            let _ = socket.send_to(&answer, peer).await;
        }
    }
}

async fn serve_tcp(listener: TcpListener, inner: Arc<Inner>, queue: mpsc::Sender<String>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                if connections.len() >= MAX_CONNECTIONS {
                    continue;
                }
                let (i, q) = (inner.clone(), queue.clone());
                connections.spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(10), serve_connection(stream, i, q)).await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(mut stream: TcpStream, inner: Arc<Inner>, queue: mpsc::Sender<String>) {
    for _ in 0..4 {
        let mut len = [0u8; 2];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut message = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if stream.read_exact(&mut message).await.is_err() {
            return;
        }
        let Some(answer) = inner.on_notify(&message, &queue) else {
            return;
        };
        let Ok(n) = u16::try_from(answer.len()) else {
            return;
        };
        let mut framed = n.to_be_bytes().to_vec();
        framed.extend_from_slice(&answer);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dsync_record_in_rfc_3597_form() {
        // CDS (59), scheme 1, port 5300, registry.nic.test. uncompressed and lower case.
        let rdata = "\\# 24 003B0114B4087265676973747279036E6963047465737400";
        assert_eq!(
            dsync_generic_rdata(59, 1, 5300, "Registry.nic.test.").unwrap(),
            rdata
        );
        assert_eq!(
            dsync_record("test", 2, 5300, "registry.nic.test.").unwrap(),
            format!("*._dsync.test. 2 TYPE66 {rdata}")
        );
    }

    /// How the fake server (TLD and child in one, on 127.0.0.1) answers CDS.
    #[derive(Clone, Copy)]
    enum Cds {
        /// More CDS records than a scan reads.
        Many,
        /// Never: the connection held open.
        Silent,
        /// A name whose compression pointer points at itself.
        Looped,
    }

    fn record(owner: &[u8], rtype: u16, rdata: &[u8]) -> Vec<u8> {
        let mut out = owner.to_vec();
        out.extend_from_slice(&rtype.to_be_bytes());
        out.extend_from_slice(&CLASS_IN.to_be_bytes());
        out.extend_from_slice(&2u32.to_be_bytes());
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(rdata);
        out
    }

    /// The answer to `query`: the delegation of `child.test.` to `ns.child.test.` at
    /// 127.0.0.1 (glue), no DS, no DNSKEY; CDS as `cds` says.
    fn fake_answer(query: &[u8], cds: Cds) -> Option<Vec<u8>> {
        let q = msg::parse(query)?;
        let (qname, qtype, _) = q.question.clone()?;
        let ns = name_to_wire("ns.child.test.").ok()?;
        let (mut an, mut au, mut ad) = (Vec::new(), Vec::new(), Vec::new());
        match qtype {
            TYPE_NS => {
                au.push(record(&qname, TYPE_NS, &ns));
                ad.push(record(&ns, TYPE_A, &[127, 0, 0, 1]));
            }
            TYPE_CDS => match cds {
                Cds::Many => {
                    for i in 0..40u8 {
                        an.push(record(&qname, TYPE_CDS, &[0, i, 13, 2, i]));
                    }
                }
                Cds::Silent => return None,
                Cds::Looped => an.push(vec![0xc0, q.question_end as u8]),
            },
            _ => {}
        }
        let mut out = msg::answer(
            q.id,
            q.flags,
            RCODE_NOERROR,
            true,
            &query[12..q.question_end],
        );
        let counts = [an.len() as u16, au.len() as u16, ad.len() as u16];
        for (i, c) in counts.iter().enumerate() {
            out[6 + 2 * i..8 + 2 * i].copy_from_slice(&c.to_be_bytes());
        }
        for r in an.iter().chain(&au).chain(&ad) {
            out.extend_from_slice(r);
        }
        Some(out)
    }

    async fn fake_server(cds: Cds) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let mut len = [0u8; 2];
                    stream.read_exact(&mut len).await.ok()?;
                    let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
                    stream.read_exact(&mut query).await.ok()?;
                    let Some(answer) = fake_answer(&query, cds) else {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return None;
                    };
                    let mut framed = (answer.len() as u16).to_be_bytes().to_vec();
                    framed.extend_from_slice(&answer);
                    stream.write_all(&framed).await.ok()
                });
            }
        });
        addr
    }

    async fn scan_fake(cds: Cds) -> (What, Duration) {
        let server = fake_server(cds).await;
        let mut config = RegistryConfig::new(
            "test.",
            vec![server],
            IpAddr::from([127, 0, 0, 1]),
            server.port(),
        );
        config.children = vec!["child.test.".into()];
        config.limits.query_timeout = Duration::from_millis(300);
        config.bootstrap_period = Duration::ZERO;
        let registry = Registry::start(config).await.unwrap();
        let started = std::time::Instant::now();
        let what = registry.scan("child.test.").await;
        (what, started.elapsed())
    }

    /// A hostile child costs a bounded scan: too many records are refused unread, a
    /// server that never answers is given up after the query timeout, a pointer loop is
    /// a malformed answer.
    #[tokio::test]
    async fn a_hostile_child_costs_a_bounded_scan() {
        let (what, _) = scan_fake(Cds::Many).await;
        assert_eq!(
            what,
            What::Refused("127.0.0.1: serves more than 16 CDS records".into())
        );
        let (what, took) = scan_fake(Cds::Silent).await;
        assert_eq!(
            what,
            What::Refused("127.0.0.1: CDS: no answer within 300ms".into())
        );
        assert!(took < Duration::from_secs(2), "{took:?}");
        let (what, _) = scan_fake(Cds::Looped).await;
        assert_eq!(
            what,
            What::Refused("127.0.0.1: CDS: a malformed answer".into())
        );
    }

    fn signed(key: &crate::keys::LabKey, rtype: u16, rdatas: &[Vec<u8>]) -> Rrsig {
        let now = now_secs();
        let owner = name_to_wire("pd.test.").unwrap();
        let mut sig = Rrsig {
            type_covered: rtype,
            algorithm: 13,
            labels: 2,
            original_ttl: 2,
            expiration: now + 3600,
            inception: now - 60,
            key_tag: key.dnskey().key_tag(),
            signer: owner.clone(),
            signature: Vec::new(),
        };
        sig.signature = key.sign(&sig.signed_data(&owner, 1, rdatas)).unwrap();
        sig
    }

    /// A zone with a KSK signing its DNSKEY RRset and a ZSK; its CDS as given, signed by
    /// `cds_signers`.
    fn view(
        ksk: &crate::keys::LabKey,
        zsk: &crate::keys::LabKey,
        cds: &[Ds],
        cds_signers: &[&crate::keys::LabKey],
    ) -> ChildView {
        let dnskey = sorted(vec![ksk.dnskey().rdata(), zsk.dnskey().rdata()]);
        let cds = sorted(cds.iter().map(Ds::rdata).collect());
        ChildView {
            dnskey_sigs: vec![signed(ksk, TYPE_DNSKEY, &dnskey)],
            dnskey,
            cds_sigs: cds_signers
                .iter()
                .map(|k| signed(k, TYPE_CDS, &cds))
                .collect(),
            cds,
            ..ChildView::default()
        }
    }

    /// RFC 7344 section 4.1 and RFC 8078 over real signatures: a bootstrap's CDS names a
    /// key signing the DNSKEY RRset; a change or a delete is signed by a key the current
    /// DS names.
    #[test]
    fn the_signing_rules() {
        use crate::keys::LabKey;
        let child = "pd.test.";
        let (ksk, zsk, new) = (
            LabKey::generate(257).unwrap(),
            LabKey::generate(256).unwrap(),
            LabKey::generate(257).unwrap(),
        );
        let ds_of = |k: &LabKey| k.dnskey().to_ds(child, DigestType::Sha256).unwrap();
        let check = |v: &ChildView, desired: &[Ds], current: &[Ds], delete: bool| {
            validate(
                child,
                v,
                desired,
                current,
                delete,
                now_secs(),
                SigLimits::default(),
            )
        };
        // Bootstrap: the CDS names the KSK (signed by the ZSK, a key of the set).
        let want = [ds_of(&ksk)];
        assert_eq!(
            check(&view(&ksk, &zsk, &want, &[&zsk]), &want, &[], false),
            Ok(())
        );
        // It names the ZSK, which signs no DNSKEY RRset; or a key not in the set at all.
        for want in [[ds_of(&zsk)], [ds_of(&new)]] {
            assert_eq!(
                check(&view(&ksk, &zsk, &want, &[&ksk]), &want, &[], false),
                Err("bootstrap: the CDS names no key that signs the DNSKEY RRset".into())
            );
        }
        // A DNSKEY RRset without its signature; a CDS signed by a key not in the set.
        let mut bare = view(&ksk, &zsk, &want, &[&ksk]);
        bare.dnskey_sigs.clear();
        assert_eq!(
            check(&bare, &want, &[], false),
            Err("the DNSKEY RRset is not signed by a key of its own".into())
        );
        assert_eq!(
            check(&view(&ksk, &zsk, &want, &[&new]), &want, &[], false),
            Err("the CDS RRset is not signed by a key of the DNSKEY RRset".into())
        );
        // A change: the DS names another key than the CDS's signers.
        assert_eq!(
            check(
                &view(&ksk, &zsk, &want, &[&ksk, &zsk]),
                &want,
                &[ds_of(&new)],
                false
            ),
            Err("the CDS RRset is not signed by a key the DS names".into())
        );
        assert_eq!(
            check(
                &view(&ksk, &zsk, &want, &[&zsk]),
                &want,
                &[ds_of(&ksk)],
                false
            ),
            Err("the CDS RRset is not signed by a key the DS names".into())
        );
        // A change signed by the key the DS names, towards a key signing the DNSKEY RRset.
        let current = [ds_of(&zsk)];
        assert_eq!(
            check(&view(&ksk, &zsk, &want, &[&zsk]), &want, &current, false),
            Ok(())
        );
        // A delete: signed by the key the DS names, or refused.
        let delete = [Ds::from_rdata(&[0, 0, 0, 0, 0]).unwrap()];
        let current = [ds_of(&ksk)];
        assert_eq!(
            check(&view(&ksk, &zsk, &delete, &[&ksk]), &[], &current, true),
            Ok(())
        );
        assert_eq!(
            check(&view(&ksk, &zsk, &delete, &[&zsk]), &[], &current, true),
            Err("the CDS RRset is not signed by a key the DS names".into())
        );
    }

    fn ds(tag: u16, digest: u8) -> Ds {
        Ds {
            key_tag: tag,
            algorithm: 13,
            digest_type: 2,
            digest: vec![digest; 32],
        }
    }

    #[test]
    fn what_the_cds_and_cdnskey_ask_for() {
        let child = "pd.test.";
        let key = crate::keys::LabKey::generate(257).unwrap().dnskey();
        let named = key.to_ds(child, DigestType::Sha256).unwrap();
        let delete_cds = Ds::from_rdata(&[0, 0, 0, 0, 0]).unwrap();
        let delete_key = Dnskey::from_rdata(&[0, 0, 3, 0, 0]).unwrap();
        // The CDS as it is; the CDNSKEY alone as its SHA-256 DS; both when they agree.
        assert_eq!(
            desired_ds(child, &[ds(1, 1), ds(1, 1)], &[]),
            Ok(Some(vec![ds(1, 1)]))
        );
        assert_eq!(
            desired_ds(child, &[], std::slice::from_ref(&key)),
            Ok(Some(vec![named.clone()]))
        );
        assert_eq!(
            desired_ds(
                child,
                std::slice::from_ref(&named),
                std::slice::from_ref(&key)
            ),
            Ok(Some(vec![named.clone()]))
        );
        assert!(desired_ds(child, &[ds(1, 1)], std::slice::from_ref(&key)).is_err());
        // Deletes: alone, or agreed by both; never beside other records.
        assert_eq!(
            desired_ds(child, std::slice::from_ref(&delete_cds), &[]),
            Ok(None)
        );
        assert_eq!(
            desired_ds(
                child,
                std::slice::from_ref(&delete_cds),
                std::slice::from_ref(&delete_key)
            ),
            Ok(None)
        );
        assert!(desired_ds(child, &[delete_cds.clone(), ds(1, 1)], &[]).is_err());
        assert!(desired_ds(child, std::slice::from_ref(&delete_cds), &[key]).is_err());
        let zsk = Dnskey {
            flags: 0,
            ..delete_key
        };
        assert!(
            desired_ds(
                child,
                &[],
                &[Dnskey {
                    public_key: vec![1; 64],
                    algorithm: 13,
                    ..zsk
                }]
            )
            .is_err()
        );
    }
}
