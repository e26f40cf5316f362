//! A provider simulator faithful to the provider API (DESIGN.md section 7), over real HTTP
//! on loopback: zones,
//! RRsets, DNSSEC with real ECDSA P-256 keys, login and refresh with expiring tokens, the
//! documented status codes and error bodies, fault injection, and a log of every
//! state-changing call (the oracle for "DNSSEC was never switched off too early").
//!
//! Where the provider's behaviour is only inferred from its documents (the status of a
//! duplicate zone, list limits, the body of a 401, Retry-After), the behaviour is a field
//! of [`SimOptions`].

mod faults;
mod routes;
mod state;
mod tokens;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;
use url::Url;

pub(crate) use faults::FaultPlan;
pub use faults::{Fault, FaultCount, FaultKind};

use crate::dnssec::Dnskey;
use crate::keys::LabKey;
use state::{SimState, normalize};

/// The simulator's behaviour where the provider's is a choice or unknown.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Keys accepted in `Authorization: APIKey <key>`.
    pub api_keys: Vec<String>,
    /// Accounts accepted by the login call: (username, password).
    pub users: Vec<(String, String)>,
    pub access_token_lifetime: Duration,
    pub refresh_token_lifetime: Duration,
    /// Logins beyond this many in one second get 429 (DESIGN.md section 7).
    pub logins_per_second: usize,
    /// Status for creating a zone that exists (unknown 1: 409 assumed).
    pub zone_exists_status: u16,
    /// Default and maximum `limit` of the list calls (unknown 2).
    pub default_page_limit: usize,
    pub max_page_limit: usize,
    /// Bodies of 401 and 403 on DNS paths (unknown 3).
    pub unauthorized_body: serde_json::Value,
    pub forbidden_body: serde_json::Value,
    /// `message` of PATCH answers (unknown 4).
    pub enable_message: String,
    pub disable_message: String,
    /// The apex NS RRset every new zone gets, and its TTL.
    pub name_servers: Vec<String>,
    pub name_server_ttl: u32,
    /// TTL of the `ds` line.
    pub ds_ttl: u32,
    /// The prose-only guard: refuse to disable while the parent-ds hint is set, unless
    /// `force_disable` is sent. Off by default, as the OpenAPI document does not show it.
    pub refuse_disable_with_parent_ds: bool,
    /// A real signer behind the DNSSEC switch (e.g. Knot DNS); `None`: the simulator makes
    /// its own keys and the lab's servers sign with them.
    pub signer: Option<Arc<dyn Signer>>,
}

/// A real signer behind the simulator's DNSSEC switch, so that the key the API reports is
/// the key real name servers serve: `PATCH …/dnssec` turns its signing of the zone on or
/// off, `GET …/dnssec` asks it which key it signs with. Zone names come lower case with
/// the trailing dot. Called on a blocking thread: implementations may run processes.
pub trait Signer: Send + Sync + std::fmt::Debug + 'static {
    /// Starts signing `zone` (a no-op if it is signed) and returns its key-signing key.
    fn enable(&self, zone: &str) -> Result<Dnskey, String>;
    /// Stops signing `zone`: it is served unsigned afterwards.
    fn disable(&self, zone: &str) -> Result<(), String>;
    /// The key `zone` is signed with now; `None` while it is served unsigned.
    fn key(&self, zone: &str) -> Result<Option<Dnskey>, String>;
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            api_keys: Vec::new(),
            users: Vec::new(),
            access_token_lifetime: Duration::from_secs(3600),
            refresh_token_lifetime: Duration::from_secs(86_400),
            logins_per_second: 5,
            zone_exists_status: 409,
            default_page_limit: 100,
            max_page_limit: 1000,
            unauthorized_body: serde_json::json!({"error": "Unauthorized"}),
            forbidden_body: serde_json::json!({"error": "Forbidden"}),
            enable_message: "DNSSEC is enabled for the zone".into(),
            disable_message: "DNSSEC is disabled for the zone".into(),
            name_servers: vec!["ns1.gcorelabs.net".into(), "ns2.gcdn.services".into()],
            name_server_ttl: 3600,
            ds_ttl: 3600,
            refuse_disable_with_parent_ds: false,
            signer: None,
        }
    }
}

/// One state-changing DNS call as the simulator received it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    pub at: SystemTime,
    pub method: String,
    pub path: String,
    pub body: serde_json::Value,
    pub status: u16,
}

impl CallRecord {
    /// A successful `PATCH …/dnssec` with `{"enabled": false}` for `zone`.
    pub fn is_dnssec_off(&self, zone: &str) -> bool {
        self.is_dnssec_switch(zone) && self.body.get("enabled") == Some(&false.into())
    }

    pub fn is_dnssec_on(&self, zone: &str) -> bool {
        self.is_dnssec_switch(zone) && self.body.get("enabled") == Some(&true.into())
    }

    fn is_dnssec_switch(&self, zone: &str) -> bool {
        self.method == "PATCH"
            && (200..300).contains(&self.status)
            && self.path == format!("/dns/v2/zones/{}/dnssec", normalize(zone))
    }
}

#[derive(Clone)]
struct Shared(Arc<Mutex<SimState>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, SimState> {
        // A panicking handler must not take the whole simulator down with it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running simulator. Dropping it stops the server.
pub struct ProviderSim {
    addr: SocketAddr,
    handle: SimHandle,
    server: JoinHandle<()>,
}

impl ProviderSim {
    /// Starts serving on `listen` (port 0 picks a free one).
    pub async fn start(listen: SocketAddr, options: SimOptions) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shared = Shared(Arc::new(Mutex::new(SimState::new(options))));
        let app = routes::router(shared.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "provider simulator stopped");
            }
        });
        Ok(Self {
            addr,
            handle: SimHandle(shared),
            server,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/`, the `provider.base_url` that reaches this simulator.
    pub fn base_url(&self) -> Url {
        Url::parse(&format!("http://{}/", self.addr)).expect("a socket address makes a URL")
    }

    pub fn handle(&self) -> SimHandle {
        self.handle.clone()
    }

    /// Serves until the task is aborted (the standalone `lab provider` command).
    pub async fn wait(self) {
        let server = &mut { self }.server;
        let _ = server.await;
    }
}

impl Drop for ProviderSim {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The lab's and the tests' lever on a running simulator.
#[derive(Clone)]
pub struct SimHandle(Shared);

impl SimHandle {
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

    /// Every state-changing DNS call so far, oldest first.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.0.lock().calls.clone()
    }

    /// Creates a zone directly, as if through the API; false if it exists.
    pub fn add_zone(&self, name: &str) -> bool {
        self.0
            .lock()
            .create_zone(name, Default::default())
            .is_some()
    }

    /// The signing key of `zone` while DNSSEC is on: what the lab's name servers serve.
    pub fn signing_key(&self, zone: &str) -> Option<LabKey> {
        let state = self.0.lock();
        let z = state.zones.get(&normalize(zone))?;
        z.key.as_ref().and_then(|k| k.lab.clone())
    }

    /// The public key of `zone` while DNSSEC is on (the signer's, when there is one).
    pub fn dnskey(&self, zone: &str) -> Option<Dnskey> {
        let state = self.0.lock();
        let z = state.zones.get(&normalize(zone))?;
        z.key.as_ref().map(|k| k.dnskey.clone())
    }

    pub fn dnssec_enabled(&self, zone: &str) -> bool {
        self.dnskey(zone).is_some()
    }

    /// Switches DNSSEC on with a key of the simulator's own, as the API would without a
    /// signer (set-up of many zones at once, e.g. the benchmark); false if no such zone.
    pub fn enable_dnssec(&self, zone: &str) -> bool {
        let mut state = self.0.lock();
        let Some(z) = state.zones.get_mut(&normalize(zone)) else {
            return false;
        };
        if z.key.is_none() {
            match LabKey::generate(257) {
                Ok(key) => z.key = Some(state::SimKey::generated(key)),
                Err(_) => return false,
            }
            z.set_dnssec_status("pending");
        }
        true
    }

    /// Sets what the provider's own parent scan reports (and its `dnssec_status`).
    pub fn set_parent_ds_hint(&self, zone: &str, present: bool) {
        let mut state = self.0.lock();
        if let Some(z) = state.zones.get_mut(&normalize(zone)) {
            z.parent_ds_hint = present;
            if present && z.key.is_some() {
                z.set_dnssec_status("active");
            }
        }
    }

    /// Switches DNSSEC off behind everyone's back, as a person in the control panel might.
    pub fn force_dnssec_off(&self, zone: &str) {
        let mut state = self.0.lock();
        if let Some(z) = state.zones.get_mut(&normalize(zone))
            && z.key.take().is_some()
        {
            z.set_dnssec_status("disabled");
        }
    }

    /// Makes every call about `zone` answer 403.
    pub fn forbid_zone(&self, zone: &str) {
        self.0.lock().forbidden.insert(normalize(zone));
    }

    /// Lays `fields` over the DNSSEC object the API returns for `zone`: a provider whose
    /// `digest`, `key_tag` or `ds` disagrees with its own key.
    pub fn override_dnssec_fields(&self, zone: &str, fields: serde_json::Value) {
        let mut state = self.0.lock();
        if let (Some(z), serde_json::Value::Object(map)) =
            (state.zones.get_mut(&normalize(zone)), fields)
        {
            z.dnssec_override = map;
        }
    }

    /// Every API request so far, counted by method and path shape
    /// (`GET /dns/v2/zones`, `GET /dns/v2/zones/{zone}/dnssec`, …).
    pub fn requests(&self) -> std::collections::BTreeMap<String, u64> {
        self.0.lock().requests.clone()
    }

    pub fn reset_requests(&self) {
        self.0.lock().requests.clear();
    }

    /// (successful logins, successful refreshes) so far.
    pub fn token_counts(&self) -> (u64, u64) {
        let state = self.0.lock();
        (state.logins_ok, state.refreshes_ok)
    }

    /// (login requests, refresh requests) so far, refused ones included.
    pub fn auth_attempts(&self) -> (u64, u64) {
        let state = self.0.lock();
        (state.login_attempts, state.refresh_attempts)
    }

    /// Revokes an account: its password no longer logs in, and every token issued so far
    /// (anyone's) is refused.
    pub fn revoke_user(&self, username: &str) {
        let mut state = self.0.lock();
        state.options.users.retain(|(u, _)| u != username);
        state.tokens.expire_access_tokens();
        state.tokens.expire_refresh_tokens();
    }

    pub fn expire_access_tokens(&self) {
        self.0.lock().tokens.expire_access_tokens();
    }

    pub fn expire_refresh_tokens(&self) {
        self.0.lock().tokens.expire_refresh_tokens();
    }
}
