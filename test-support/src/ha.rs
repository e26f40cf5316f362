//! Several `dnssec-warden run` processes on one PostgreSQL database over the lab world:
//! the provider simulator (its call log is the ground truth of every provider call), the
//! lab DNS hierarchy with many child zones, and a webhook receiver that is also the
//! registrar: a `ds_publish` puts the simulator's key's DS on both TLD servers, a
//! `ds_withdraw` removes it, and both are recorded with their time (the ground truth of
//! the parent's DS). Used by `tests/e2e/ha_fencing.rs` and `ha_chaos.rs`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use axum::Json;
use axum::extract::State as AxumState;
use axum::http::StatusCode;
use axum::routing::post;
use dnssec_warden::lifecycle::{Clock, Intent, SystemClock};
use dnssec_warden_lab::DigestType;
use dnssec_warden_lab::dns::{KeySource, LabDns, NAME_SERVERS, TldServers};
use dnssec_warden_lab::{ProviderSim, SimOptions};
use serde_json::Value;
use sqlx::Row;

use crate::daemon::{Daemon, KEY};
use crate::postgres::Cluster;

/// The parent's DS TTL and the simulator's `ds` TTL in the lab (seconds).
pub const DS_TTL: u64 = 2;

/// What the registrar (the webhook receiver) saw and did for one zone.
#[derive(Debug, Default, Clone)]
pub struct RegistrarZone {
    /// When the DS went onto both TLD servers, each time.
    pub published: Vec<SystemTime>,
    /// When it was taken off both, each time.
    pub removed: Vec<SystemTime>,
    /// Whether the TLD servers publish a DS now.
    pub present: bool,
    /// The number of the last request acted on.
    pub acted_seq: i64,
    /// Requests dropped as outdated: numbered below the last one acted on.
    pub stale: Vec<Value>,
}

#[derive(Default, Clone)]
pub struct Inbox {
    /// Every notification body received, in order.
    pub received: Vec<Value>,
    pub zones: HashMap<String, RegistrarZone>,
    /// DS lines announced that are not the simulator's key's DS (must stay empty).
    pub wrong_ds: Vec<String>,
}

#[derive(Clone)]
pub struct Registrar {
    inbox: Arc<Mutex<Inbox>>,
    lab: Arc<LabDns>,
    sim: dnssec_warden_lab::SimHandle,
}

impl Registrar {
    /// A copy of what the registrar received and did so far.
    pub fn snapshot(&self) -> Inbox {
        self.inbox().clone()
    }

    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn act(&self, body: &Value) {
        let zone = body["zone"].as_str().unwrap_or_default().to_string();
        let event = body["event"].as_str().unwrap_or_default();
        let mut inbox = self.inbox();
        inbox.received.push(body.clone());
        // As the README asks of automation: act only on a request numbered above the last
        // one acted on (a repeat of that one is harmless: it changes nothing).
        let seq = body["seq"].as_i64().unwrap_or_default();
        if matches!(event, "ds_publish" | "ds_withdraw") {
            let z = inbox.zones.entry(zone.clone()).or_default();
            if seq < z.acted_seq {
                z.stale.push(body.clone());
                return;
            }
            z.acted_seq = seq;
        }
        match event {
            "ds_publish" => {
                let Some(key) = self.sim.dnskey(&zone) else {
                    inbox.wrong_ds.push(format!(
                        "{zone}: a DS announced while the provider signs nothing"
                    ));
                    return;
                };
                let ds = key
                    .to_ds(&zone, DigestType::Sha256)
                    .expect("a DS of the simulator's key");
                let announced = body["ds"].as_str().unwrap_or_default();
                if !announced
                    .to_ascii_uppercase()
                    .ends_with(&ds.to_string().to_ascii_uppercase())
                {
                    inbox.wrong_ds.push(format!(
                        "{zone}: announced {announced:?}, the key's DS is {ds}"
                    ));
                    return;
                }
                self.lab
                    .publish_ds(&zone, TldServers::Both, &key)
                    .expect("a lab zone");
                let z = inbox.zones.entry(zone).or_default();
                if !z.present {
                    z.published.push(SystemTime::now());
                    z.present = true;
                }
            }
            "ds_withdraw" => {
                self.lab
                    .remove_ds(&zone, TldServers::Both)
                    .expect("a lab zone");
                let z = inbox.zones.entry(zone).or_default();
                if z.present {
                    z.removed.push(SystemTime::now());
                    z.present = false;
                }
            }
            _ => {}
        }
    }
}

async fn receive(
    AxumState(registrar): AxumState<Registrar>,
    Json(body): Json<Value>,
) -> StatusCode {
    registrar.act(&body);
    StatusCode::OK
}

/// The lab world, a database, a config file for the daemons, and the daemons themselves.
pub struct HaWorld {
    pub sim: ProviderSim,
    pub lab: Arc<LabDns>,
    pub registrar: Registrar,
    pub cluster: Arc<Cluster>,
    pub db_url: String,
    pub zones: Vec<String>,
    pub config: PathBuf,
    pub lease: Duration,
    pub daemons: Vec<Daemon>,
    started: usize,
    pub dir: tempfile::TempDir,
}

/// `z000.test.`, `z001.test.`, …
pub fn zone(i: usize) -> String {
    format!("z{i:03}.test.")
}

impl HaWorld {
    /// `zones` child zones at the provider (unsigned, delegated to it, no DS), a database,
    /// and a config: leases of `lease`, waiting zones looked at every `poll_waiting`.
    pub async fn start(zones: usize, lease: Duration, poll_waiting: Duration) -> Self {
        let sim = ProviderSim::start(
            "127.0.0.1:0".parse().unwrap(),
            SimOptions {
                api_keys: vec![KEY.into()],
                ds_ttl: DS_TTL as u32,
                name_server_ttl: 1,
                name_servers: NAME_SERVERS.map(String::from).to_vec(),
                ..SimOptions::default()
            },
        )
        .await
        .unwrap();
        let lab = Arc::new(LabDns::start().await.unwrap());
        let names: Vec<String> = (0..zones).map(zone).collect();
        for name in &names {
            assert!(sim.handle().add_zone(name));
            lab.add_child(name, KeySource::provider(sim.handle()))
                .unwrap();
            lab.set_ds_ttl(name, DS_TTL as u32).unwrap();
            lab.set_zone_ttl(name, 1).unwrap();
            lab.set_dnskey_ttl(name, 1).unwrap();
        }
        let registrar = Registrar {
            inbox: Arc::default(),
            lab: lab.clone(),
            sim: sim.handle(),
        };
        let app = axum::Router::new()
            .route("/hook", post(receive))
            .with_state(registrar.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hook: SocketAddr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let cluster = Cluster::shared();
        let db_url = cluster.database().await;
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("api-key");
        std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
        let config = dir.path().join("config.toml");
        let ms = |d: Duration| format!("\"{}ms\"", d.as_millis());
        std::fs::write(
            &config,
            format!(
                "[provider]\nbase_url = \"{}\"\napi_key_file = {key_file:?}\n\
                 request_timeout = \"3s\"\nmax_attempts = 2\nretry_budget = \"5s\"\n\
                 [database]\nurl = {db_url:?}\n\
                 [cluster]\nnode = \"ha\"\nlease = {}\n\
                 {}\
                 [timing]\npoll_waiting = {}\npoll_active = {}\npropagation_margin = \"1s\"\n\
                 ds_overdue_after = \"1h\"\nds_removal_overdue_after = \"1h\"\n\
                 observation_failing_after = \"1h\"\nretry_base = \"300ms\"\nassumed_ds_ttl = \"2s\"\n\
                 [zones]\nall = true\n\
                 [[alerts.webhook]]\nurl = \"http://{hook}/hook\"\ntimeout = \"3s\"\nmax_attempts = 2\nbackoff = \"50ms\"\n",
                sim.base_url().as_str().trim_end_matches('/'),
                ms(lease),
                lab.config_section(),
                ms(poll_waiting),
                ms(poll_waiting * 2),
            ),
        )
        .unwrap();
        Self {
            sim,
            lab,
            registrar,
            cluster,
            db_url,
            zones: names,
            config,
            lease,
            daemons: Vec::new(),
            started: 0,
            dir,
        }
    }

    /// Starts one more daemon (its log in the world's directory); its index.
    pub fn start_daemon(&mut self, env: &[(&str, String)]) -> usize {
        self.started += 1;
        let log = self.dir.path().join(format!("daemon-{}.log", self.started));
        self.daemons
            .push(Daemon::start_with_env(&self.config, log, env));
        self.daemons.len() - 1
    }

    /// Replaces daemon `i` (dead) with a new process.
    pub fn restart_daemon(&mut self, i: usize) {
        self.started += 1;
        let log = self.dir.path().join(format!("daemon-{}.log", self.started));
        self.daemons[i] = Daemon::start_with_env(&self.config, log, &[]);
    }

    /// Every daemon log, for failure messages (the last `lines` lines of each).
    pub fn logs(&self, lines: usize) -> String {
        self.daemons
            .iter()
            .map(|d| {
                let log = d.log();
                let all: Vec<&str> = log.lines().collect();
                let tail = all[all.len().saturating_sub(lines)..].join("\n");
                format!(
                    "--- {} (pid {}) ---\n{tail}\n",
                    d.log.display(),
                    d.child.id()
                )
            })
            .collect()
    }

    pub async fn db(&self) -> sqlx::PgPool {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&self.db_url)
            .await
            .unwrap_or_else(|e| panic!("the test's own connection: {e}\n{}", self.cluster.log()))
    }

    /// Every zone's state (`None`: not yet observed).
    pub async fn states(&self, db: &sqlx::PgPool) -> BTreeMap<String, Option<String>> {
        // Until the first daemon migrated the database there is no table: nothing yet.
        sqlx::query("SELECT name, state FROM zones")
            .fetch_all(db)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r.get::<String, _>(0), r.get::<Option<String>, _>(1)))
            .collect()
    }

    /// Records the operator's intent for `zones`, as `dnssec-warden enable|disable` does.
    pub async fn intend(&self, zones: &[String], intent: Intent) {
        // Through the binary for the first (the operator's path), in SQL for the rest: 300
        // CLI processes would cost the chaos test its time budget, and `set_intent` is the
        // same store call the CLI makes.
        let (first, rest) = zones.split_first().expect("some zones");
        let verb = if intent == Intent::Enabled {
            "enable"
        } else {
            "disable"
        };
        let (code, out, err) = crate::daemon::run(&self.config, &[verb, first]);
        assert_eq!(code, 0, "{verb} {first}: {out}{err}");
        let store = dnssec_warden::store::Store::connect(&self.settings())
            .await
            .expect("the test's store");
        let now = SystemClock.now();
        for z in rest {
            store
                .set_intent(z, intent, false, &format!("operator asked: {intent}"), now)
                .await
                .expect("the intent recorded");
        }
        store.close().await;
    }

    fn settings(&self) -> dnssec_warden::store::DatabaseSettings {
        dnssec_warden::store::DatabaseSettings::Postgres(
            dnssec_warden::store::PostgresSettings::new(
                self.db_url.parse().expect("the cluster's URL"),
            ),
        )
    }

    /// The simulator's successful DNSSEC switches per zone: (on, off) times.
    pub fn switches(&self) -> HashMap<String, (Vec<SystemTime>, Vec<SystemTime>)> {
        let mut out: HashMap<String, (Vec<SystemTime>, Vec<SystemTime>)> = HashMap::new();
        for call in self.sim.handle().calls() {
            for z in &self.zones {
                if call.is_dnssec_on(z) {
                    out.entry(z.clone()).or_default().0.push(call.at);
                } else if call.is_dnssec_off(z) {
                    out.entry(z.clone()).or_default().1.push(call.at);
                }
            }
        }
        out
    }

    /// Waits until every zone is in the state `want` gives it; the states that are not,
    /// after `within`.
    pub async fn converge(
        &self,
        db: &sqlx::PgPool,
        within: Duration,
        want: impl Fn(&str) -> &'static str,
    ) -> Result<(), Vec<String>> {
        let until = Instant::now() + within;
        loop {
            let states = self.states(db).await;
            let off: Vec<String> = self
                .zones
                .iter()
                .filter(|z| states.get(*z).and_then(|s| s.as_deref()) != Some(want(z)))
                .map(|z| format!("{z}: {:?} (want {})", states.get(z), want(z)))
                .collect();
            if off.is_empty() {
                return Ok(());
            }
            if Instant::now() > until {
                return Err(off);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The audit trail's (holder, epoch) per zone, in the order written.
    pub async fn writers(
        &self,
        db: &sqlx::PgPool,
    ) -> HashMap<String, Vec<(Option<String>, Option<i64>)>> {
        let mut out: HashMap<String, Vec<_>> = HashMap::new();
        for r in sqlx::query("SELECT zone, holder, epoch FROM events ORDER BY id")
            .fetch_all(db)
            .await
            .unwrap()
        {
            out.entry(r.get::<String, _>(0))
                .or_default()
                .push((r.get::<Option<String>, _>(1), r.get::<Option<i64>, _>(2)));
        }
        out
    }
}

/// Ground truth at a "DNSSEC off": the TLD servers published no DS for the zone then, nor
/// within the DS TTL before (the registrar's record of its own edits).
pub fn off_was_safe(registrar: &RegistrarZone, at: SystemTime) -> Result<(), String> {
    let mut present = false;
    let mut last_removed = None;
    let mut events: Vec<(SystemTime, bool)> = registrar
        .published
        .iter()
        .map(|t| (*t, true))
        .chain(registrar.removed.iter().map(|t| (*t, false)))
        .collect();
    events.sort();
    for (t, publish) in events {
        if t > at {
            break;
        }
        present = publish;
        if !publish {
            last_removed = Some(t);
        }
    }
    if present {
        return Err("the DS was published at the parent".into());
    }
    if let Some(removed) = last_removed {
        let gone_for = at.duration_since(removed).unwrap_or_default();
        if gone_for < Duration::from_secs(DS_TTL) {
            return Err(format!(
                "the DS was removed only {gone_for:?} before (its TTL is {DS_TTL} s)"
            ));
        }
    }
    Ok(())
}

/// The process's state letter from /proc (`T`: stopped), `None` once it is gone.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}
