//! An Amazon Route 53 API simulator (docs/providers/route53.md: botocore's `route53`
//! model, the shapes, error codes and order it answers with), over real HTTP on loopback:
//! every request's Signature Version 4 checked (its shape, its scope, its time and the
//! signature itself, [`sigv4`]), hosted zones listed and paged (ListHostedZones by
//! `marker`, ListHostedZonesByName from a name), GetHostedZone, the record sets with
//! their TTLs, GetDNSSEC, the key-signing keys (create, activate, deactivate, delete),
//! Enable/DisableHostedZoneDNSSEC with Route 53's own refusals, every change `PENDING`
//! then `INSYNC` after a while (GetChange), `Throttling` past the account's rate, fault
//! injection, and a log of every state-changing call.
//!
//! Its wire form is its own XML, built by hand from the summary. The lab's name servers
//! sign a zone with its `ACTIVE` key-signing key once the change that enabled signing is
//! `INSYNC`, until the change that disabled it is ([`Route53Handle::signing_key`],
//! `dns::zone::KeySource::route53`). A KMS key ARN names one key whichever the zone, as
//! a KMS key does.

mod routes;
pub mod sigv4;
mod state;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::JoinHandle;
use url::Url;

use crate::dnssec::Dnskey;
use crate::keys::LabKey;
use crate::provider_sim::{CallRecord, Fault};
use state::{R53State, fqdn};

/// What the lab's parent says of a zone, asked when Route 53 would check it: its NS set
/// (EnableHostedZoneDNSSEC refuses while it is not the zone's) and whether a DS names a
/// key (DisableHostedZoneDNSSEC and DeactivateKeySigningKey refuse while it does). Called
/// with the simulator's state locked: it must answer at once, from memory.
pub type ParentNs = Arc<dyn Fn(&str) -> Option<Vec<String>> + Send + Sync>;
/// `Some(true)`: a DS is published for the zone; `None`: unknown (not checked).
pub type ParentDs = Arc<dyn Fn(&str) -> Option<bool> + Send + Sync>;

/// The simulator's behaviour where Route 53's is a choice or unknown.
#[derive(Clone)]
pub struct Route53Options {
    /// Access key pairs accepted: (access key id, secret access key).
    pub credentials: Vec<(String, String)>,
    /// The region the credential scope must name (with a custom endpoint botocore signs
    /// with the client's region; AWS's own endpoint wants `us-east-1`).
    pub region: String,
    /// How far a request's `X-Amz-Date` may be from the simulator's clock (AWS: 5 min).
    pub max_skew: Duration,
    /// How long a change stays `PENDING` (AWS: "generally within 60 seconds").
    pub change_delay: Duration,
    /// Requests a second per account; `None`: no limit.
    pub rate_limit: Option<u32>,
    /// The largest page (`maxitems` above it is cut to it).
    pub max_items: usize,
    /// The name servers of every zone's delegation set.
    pub name_servers: Vec<String>,
    /// TTL of the apex records every new zone gets.
    pub record_ttl: u32,
    /// The element name of a `KeySigningKeys` item: `member` (the model) or
    /// `KeySigningKey` (the API reference).
    pub ksk_item: &'static str,
    pub parent_ns: Option<ParentNs>,
    pub parent_ds: Option<ParentDs>,
    /// The `Host` the client signed, where a proxy between them (the tests' fault proxy)
    /// rewrites it: checked in its place.
    pub signed_host: Option<String>,
}

impl std::fmt::Debug for Route53Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route53Options")
            .field("credentials", &self.credentials.len())
            .field("region", &self.region)
            .field("change_delay", &self.change_delay)
            .field("rate_limit", &self.rate_limit)
            .finish_non_exhaustive()
    }
}

impl Default for Route53Options {
    fn default() -> Self {
        Self {
            credentials: Vec::new(),
            region: "us-east-1".into(),
            max_skew: Duration::from_secs(300),
            change_delay: Duration::from_secs(2),
            rate_limit: Some(5),
            max_items: 100,
            name_servers: vec![
                "ns-1.awsdns-01.org.".into(),
                "ns-2.awsdns-02.co.uk.".into(),
                "ns-3.awsdns-03.com.".into(),
                "ns-4.awsdns-04.net.".into(),
            ],
            record_ttl: 172_800,
            ksk_item: "member",
            parent_ns: None,
            parent_ds: None,
            signed_host: None,
        }
    }
}

#[derive(Clone)]
struct Shared(Arc<Mutex<R53State>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, R53State> {
        // A panicking handler must not take the whole simulator down with it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running simulator. Dropping it stops the server.
pub struct Route53Sim {
    addr: SocketAddr,
    handle: Route53Handle,
    server: JoinHandle<()>,
}

impl Route53Sim {
    /// Starts serving on `listen` (port 0 picks a free one).
    pub async fn start(listen: SocketAddr, options: Route53Options) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shared = Shared(Arc::new(Mutex::new(R53State::new(options))));
        let app = routes::router(shared.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "Route 53 simulator stopped");
            }
        });
        Ok(Self {
            addr,
            handle: Route53Handle(shared),
            server,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the `base_url` that reaches this simulator.
    pub fn base_url(&self) -> Url {
        Url::parse(&format!("http://{}", self.addr)).expect("a socket address makes a URL")
    }

    pub fn handle(&self) -> Route53Handle {
        self.handle.clone()
    }
}

impl Drop for Route53Sim {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The lab's and the tests' lever on a running simulator.
#[derive(Clone)]
pub struct Route53Handle(Shared);

impl Route53Handle {
    /// Creates a public hosted zone, as the console would; its id (bare, `Z…`). A second
    /// zone of one name is allowed, as Route 53 allows it.
    pub fn add_zone(&self, name: &str) -> String {
        self.0.lock().create_zone(name, false)
    }

    /// Creates a private hosted zone (DNSSEC is for public ones).
    pub fn add_private_zone(&self, name: &str) -> String {
        self.0.lock().create_zone(name, true)
    }

    /// The id of the (first) public zone of that name.
    pub fn zone_id(&self, name: &str) -> Option<String> {
        let state = self.0.lock();
        state.public_id(&fqdn(name))
    }

    /// Adds a record set (its TTL counts in the listing); `ttl` `None` with an `alias`
    /// target makes an alias.
    pub fn add_record(
        &self,
        zone: &str,
        rtype: &str,
        name: &str,
        ttl: Option<u32>,
        alias: Option<&str>,
    ) {
        self.0.lock().add_record(zone, rtype, name, ttl, alias);
    }

    /// Makes a KMS key of this ARN (a key-signing key created from it signs with it);
    /// an ARN never made is refused as `InvalidKMSArn`.
    pub fn add_kms_key(&self, arn: &str) -> Dnskey {
        self.0.lock().kms_key(arn).dnskey()
    }

    /// The key the lab's name servers sign `zone` with now: its `ACTIVE` key-signing
    /// key's while the signing change is `INSYNC`, `None` otherwise.
    pub fn signing_key(&self, zone: &str) -> Option<LabKey> {
        let mut state = self.0.lock();
        state.advance();
        state.signing_key(&fqdn(zone))
    }

    /// The DNSKEY of the zone's `ACTIVE` key-signing key, if any.
    pub fn dnskey(&self, zone: &str) -> Option<Dnskey> {
        let mut state = self.0.lock();
        state.advance();
        state.active_key(&fqdn(zone)).map(|k| k.dnskey())
    }

    /// The zone's `ServeSignature` and its keys' (name, status), as GetDNSSEC says now.
    pub fn dnssec(&self, zone: &str) -> Option<(String, Vec<(String, String)>)> {
        let mut state = self.0.lock();
        state.advance();
        state.dnssec_summary(&fqdn(zone))
    }

    /// Reports the zone's `ServeSignature` as this (`ACTION_NEEDED`, say), or as it is
    /// (`None`).
    pub fn override_serve_signature(&self, zone: &str, value: Option<&str>) {
        self.0.lock().serve_override(&fqdn(zone), value);
    }

    /// Lays these members over every key-signing key GetDNSSEC lists for `zone`: a
    /// Route 53 whose `KeyTag`, `DigestValue` or `DSRecord` disagrees with its key.
    pub fn override_ksk_fields(&self, zone: &str, fields: &[(&str, &str)]) {
        self.0.lock().ksk_override(&fqdn(zone), fields);
    }

    /// The account's request rate from now on (fresh buckets).
    pub fn set_rate_limit(&self, per_second: Option<u32>) {
        let mut state = self.0.lock();
        state.options.rate_limit = per_second;
        state.buckets.clear();
    }

    /// The `Host` the client signed, behind a proxy that rewrites it (see
    /// [`Route53Options::signed_host`]).
    pub fn set_signed_host(&self, host: Option<String>) {
        self.0.lock().options.signed_host = host;
    }

    /// How long changes stay `PENDING` from now on.
    pub fn set_change_delay(&self, delay: Duration) {
        self.0.lock().options.change_delay = delay;
    }

    pub fn inject(&self, fault: Fault) {
        self.0.lock().faults.faults.push(fault);
    }

    pub fn clear_faults(&self) {
        let mut state = self.0.lock();
        state.faults.faults.clear();
        state.faults.latency = Duration::ZERO;
    }

    /// Starts recording every request and answer, both bodies as sent (XML), for the
    /// conformance tests; [`Self::exchanges`] reads them.
    pub fn record_exchanges(&self) {
        self.0.lock().exchanges.start();
    }

    /// The requests and answers recorded since the last read, oldest first.
    pub fn exchanges(&self) -> Vec<crate::exchange_log::Exchange> {
        let log = self.0.lock().exchanges.clone();
        log.take()
    }

    /// Every state-changing call so far, oldest first (bodies as XML strings).
    pub fn calls(&self) -> Vec<CallRecord> {
        self.0.lock().calls.clone()
    }

    /// Every API request so far, by method and path shape
    /// (`GET /2013-04-01/hostedzone/{id}/dnssec`), refused ones included.
    pub fn requests(&self) -> std::collections::BTreeMap<String, u64> {
        self.0.lock().requests.clone()
    }

    /// Requests answered `Throttling` so far.
    pub fn throttled(&self) -> u64 {
        self.0.lock().throttled
    }

    /// Requests refused for their signature so far, by code.
    pub fn auth_refusals(&self) -> std::collections::BTreeMap<String, u64> {
        self.0.lock().auth_refusals.clone()
    }
}
