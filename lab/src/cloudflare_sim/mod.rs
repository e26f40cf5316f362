//! A Cloudflare API v4 simulator (docs/cloudflare-api.md: the shapes, statuses, errors,
//! paging and rate limits it answers with), over real HTTP on loopback: API-token auth,
//! zones listed and paged, `GET`/`PATCH`/`DELETE /zones/{id}/dnssec` with Cloudflare's
//! status machine, the zone's DNS records (their TTLs), a token bucket per token, fault
//! injection, and a log of every state-changing call.
//!
//! Its wire types are its own JSON, built by hand from the summary, in the envelope every
//! Cloudflare answer has (`success`, `errors`, `messages`, `result`, `result_info`).
//!
//! One key-signing key for every zone, as Cloudflare's DS always names the same key tag:
//! the lab's name servers sign a zone with it while the simulator says the zone is signed
//! (`pending`, `active`, `pending-disabled`, and `disabled` until `DELETE`), through
//! [`CloudflareHandle::signing_key`] (`dns::zone::KeySource::cloudflare`).
//!
//! Where Cloudflare's behaviour is undocumented (how long `pending` lasts, the error of a
//! refused `DELETE`, the rate limit's code), it is a field of [`CloudflareOptions`].

mod routes;
mod state;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::JoinHandle;
use url::Url;

use crate::dnssec::Dnskey;
use crate::keys::LabKey;
use crate::provider_sim::{CallRecord, Fault};
use state::{CfState, normalize};

/// What the lab's parent says of a zone's DS, asked when a transient status may move
/// (`pending` to `active`, `pending-disabled` to `disabled`): `Some(true)` a DS is
/// published, `Some(false)` none, `None` unknown (the status stays). Called with the
/// simulator's state locked: it must answer at once, from memory.
pub type ParentDs = Arc<dyn Fn(&str) -> Option<bool> + Send + Sync>;

/// A token bucket per API token: `capacity` requests at once, refilled at `capacity`
/// per `window` (Cloudflare's global limit is 1,200 per 5 minutes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub capacity: u32,
    pub window: Duration,
}

/// The simulator's behaviour where Cloudflare's is a choice or unknown.
#[derive(Clone)]
pub struct CloudflareOptions {
    /// API tokens accepted in `Authorization: Bearer <token>`.
    pub tokens: Vec<String>,
    /// `per_page` when none is asked for, and its bounds (docs: 5..50, default 20).
    pub default_per_page: usize,
    pub min_per_page: usize,
    pub max_per_page: usize,
    /// How long `pending` and `pending-disabled` last at least before Cloudflare's own
    /// check may move them (undocumented).
    pub status_delay: Duration,
    /// The lab parent's word on a zone's DS; `None`: the statuses move after
    /// `status_delay` alone.
    pub parent_ds: Option<ParentDs>,
    /// `None`: no limit.
    pub rate_limit: Option<RateLimit>,
    /// The name servers every zone is assigned.
    pub name_servers: Vec<String>,
    /// TTL of the `ds` line.
    pub ds_ttl: u32,
    /// TTL of the apex A record every new zone gets (1: automatic, 300 s); the lab sets
    /// its own zones' TTLs shorter than Cloudflare's 60 s minimum.
    pub record_ttl: u32,
    /// Status and error of a `DELETE …/dnssec` outside `disabled` (undocumented).
    pub delete_refused: (u16, u32, String),
}

impl std::fmt::Debug for CloudflareOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudflareOptions")
            .field("tokens", &self.tokens.len())
            .field("status_delay", &self.status_delay)
            .field("rate_limit", &self.rate_limit)
            .finish_non_exhaustive()
    }
}

impl Default for CloudflareOptions {
    fn default() -> Self {
        Self {
            tokens: Vec::new(),
            default_per_page: 20,
            min_per_page: 5,
            max_per_page: 50,
            status_delay: Duration::from_secs(5),
            parent_ds: None,
            rate_limit: Some(RateLimit {
                capacity: 1200,
                window: Duration::from_secs(300),
            }),
            name_servers: vec![
                "ada.ns.cloudflare.com".into(),
                "bob.ns.cloudflare.com".into(),
            ],
            ds_ttl: 3600,
            record_ttl: 1,
            delete_refused: (
                400,
                1021,
                "DNSSEC can only be deleted once it is disabled".into(),
            ),
        }
    }
}

#[derive(Clone)]
struct Shared(Arc<Mutex<CfState>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, CfState> {
        // A panicking handler must not take the whole simulator down with it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running simulator. Dropping it stops the server.
pub struct CloudflareSim {
    addr: SocketAddr,
    handle: CloudflareHandle,
    server: JoinHandle<()>,
}

impl CloudflareSim {
    /// Starts serving on `listen` (port 0 picks a free one).
    pub async fn start(listen: SocketAddr, options: CloudflareOptions) -> std::io::Result<Self> {
        let key = LabKey::generate(257).map_err(|e| std::io::Error::other(e.to_string()))?;
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shared = Shared(Arc::new(Mutex::new(CfState::new(options, key))));
        let app = routes::router(shared.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "Cloudflare simulator stopped");
            }
        });
        Ok(Self {
            addr,
            handle: CloudflareHandle(shared),
            server,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/client/v4`, the `base_url` that reaches this simulator.
    pub fn base_url(&self) -> Url {
        Url::parse(&format!("http://{}/client/v4", self.addr))
            .expect("a socket address makes a URL")
    }

    pub fn handle(&self) -> CloudflareHandle {
        self.handle.clone()
    }
}

impl Drop for CloudflareSim {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The lab's and the tests' lever on a running simulator.
#[derive(Clone)]
pub struct CloudflareHandle(Shared);

impl CloudflareHandle {
    /// Creates a zone, as the dashboard would; its id, or `None` if it exists.
    pub fn add_zone(&self, name: &str) -> Option<String> {
        self.0.lock().create_zone(name)
    }

    /// The zone's id, as the API names it.
    pub fn zone_id(&self, name: &str) -> Option<String> {
        self.0
            .lock()
            .zones
            .get(&normalize(name))
            .map(|z| z.id.clone())
    }

    /// Adds a record to the zone (its TTL counts in the listing); `ttl` 1 is automatic.
    pub fn add_record(&self, zone: &str, rtype: &str, name: &str, content: &str, ttl: u32) {
        self.0.lock().add_record(zone, rtype, name, content, ttl);
    }

    /// The key the lab's name servers sign `zone` with now: Cloudflare's one key while
    /// the zone is signed (every status but deleted), `None` otherwise.
    pub fn signing_key(&self, zone: &str) -> Option<LabKey> {
        let mut state = self.0.lock();
        state.advance();
        let signed = state.zones.get(&normalize(zone))?.dnssec.signed;
        signed.then(|| state.key.clone())
    }

    /// The public key every signed zone is signed with.
    pub fn dnskey(&self) -> Dnskey {
        self.0.lock().key.dnskey()
    }

    /// The zone's DNSSEC status as the API reports it now (`None`: no such zone).
    pub fn dnssec_status(&self, zone: &str) -> Option<String> {
        let mut state = self.0.lock();
        state.advance();
        state
            .zones
            .get(&normalize(zone))
            .map(|z| z.dnssec.status.to_string())
    }

    /// Sets the zone's DNSSEC status to `error` (true) or back to what it was (false).
    pub fn set_dnssec_error(&self, zone: &str, error: bool) {
        if let Some(z) = self.0.lock().zones.get_mut(&normalize(zone)) {
            z.dnssec.error = error;
        }
    }

    /// Lays `fields` over the DNSSEC object the API returns for `zone`: a Cloudflare
    /// whose `digest`, `key_tag` or `ds` disagrees with its own key.
    pub fn override_dnssec_fields(&self, zone: &str, fields: serde_json::Value) {
        if let (Some(z), serde_json::Value::Object(map)) =
            (self.0.lock().zones.get_mut(&normalize(zone)), fields)
        {
            z.dnssec_override = map;
        }
    }

    /// Makes every call about `zone` answer 403, as for a token not scoped to it.
    pub fn forbid_zone(&self, zone: &str) {
        let mut state = self.0.lock();
        if let Some(id) = state.zones.get(&normalize(zone)).map(|z| z.id.clone()) {
            state.forbidden.insert(id);
        }
    }

    /// Deletes the zone, as the dashboard would (its id is gone).
    pub fn remove_zone(&self, zone: &str) {
        self.0.lock().zones.remove(&normalize(zone));
    }

    /// The rate limit from now on (a fresh bucket for every token).
    pub fn set_rate_limit(&self, limit: Option<RateLimit>) {
        let mut state = self.0.lock();
        state.options.rate_limit = limit;
        state.buckets.clear();
    }

    pub fn inject(&self, fault: Fault) {
        self.0.lock().faults.faults.push(fault);
    }

    pub fn clear_faults(&self) {
        let mut state = self.0.lock();
        state.faults.faults.clear();
        state.faults.latency = Duration::ZERO;
    }

    /// Added to every API request.
    pub fn set_latency(&self, latency: Duration) {
        self.0.lock().faults.latency = latency;
    }

    /// Starts recording every request and answer, both bodies as sent (JSON), for the
    /// conformance tests; [`Self::exchanges`] reads them.
    pub fn record_exchanges(&self) {
        self.0.lock().exchanges.start();
    }

    /// The requests and answers recorded since the last read, oldest first.
    pub fn exchanges(&self) -> Vec<crate::exchange_log::Exchange> {
        let log = self.0.lock().exchanges.clone();
        log.take()
    }

    /// Every state-changing call so far, oldest first.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.0.lock().calls.clone()
    }

    /// Every API request so far, by method and path shape
    /// (`GET /client/v4/zones/{id}/dnssec`), 429s included.
    pub fn requests(&self) -> std::collections::BTreeMap<String, u64> {
        self.0.lock().requests.clone()
    }

    /// Requests answered 429 so far.
    pub fn rate_limited(&self) -> u64 {
        self.0.lock().rate_limited
    }
}
