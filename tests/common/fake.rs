//! A scripted world for engine tests: a provider and a DNS that answer from a shared
//! model the test changes at will, on a manual clock. The provider fake also checks the
//! two invariants at the moment DNSSEC is switched off, against the ground truth (not
//! against what the engine observed):
//! - no parent server publishes a DS (safety rule 1);
//! - the last DS disappeared at least its TTL ago, so no resolver can still hold it (the
//!   physical fact behind safety rule 2; the rule adds a margin on top, which covers a DS
//!   that flickers between two looks).

use std::sync::{Arc, Mutex, MutexGuard};

use dnssec_warden::dns::delegation::ns_set;
use dnssec_warden::dns::{
    ChildKeys, ChildView, DnskeyAnswer, DsAnswer, NsAnswer, ObserveError, Observer, ParentView,
    ServerAnswer, SignatureWindow, UnknownReason, ValidationProbe,
};
use dnssec_warden::dnssec::{DigestType, Dnskey, Ds};
use dnssec_warden::lifecycle::{Clock, ManualClock, Timestamp};
use dnssec_warden::provider::{
    DnssecKey, DnssecSwitched, ParentDsHint, Provider, ProviderError, ProviderZone, Rrset,
    ZoneRecordSummary,
};
use dnssec_warden_lab::keys::LabKey;

/// The TTL the fake child servers give their DNSKEY set.
pub const DNSKEY_TTL: u32 = 300;

/// One parent name server address.
#[derive(Debug, Clone, Default)]
pub struct ParentServer {
    /// The DS set it publishes, with its TTL.
    pub ds: Option<(Vec<Ds>, u32)>,
    /// Answers nothing useful (a timeout).
    pub silent: bool,
}

/// One child name server address.
#[derive(Debug, Clone, Default)]
pub struct ChildServer {
    /// Still serves the zone unsigned although the provider signs (propagation lag).
    pub lagging: bool,
    pub silent: bool,
}

#[derive(Debug)]
pub struct WorldState {
    pub zone: String,
    pub dnssec_on: bool,
    pub key: Option<Dnskey>,
    /// The next provider calls fail with a 503.
    pub provider_failures: u32,
    /// The provider has no such zone (404 on every zone call).
    pub zone_missing: bool,
    /// The next DNSSEC switches take effect but their answer is lost (a timeout).
    pub switches_lose_answer: u32,
    /// Every `GET …/dnssec` takes this long (real time) before it answers.
    pub provider_delay: std::time::Duration,
    pub parents: Vec<ParentServer>,
    pub children: Vec<ChildServer>,
    /// Every successful switch: (time, enabled).
    pub switches: Vec<(Timestamp, bool)>,
    /// Broken invariants, in words; a correct engine leaves this empty.
    pub violations: Vec<String>,
    /// Ground truth for rule 2: when the parent last stopped publishing any DS, and the
    /// largest TTL it was published with.
    pub ds_gone_at: Option<Timestamp>,
    pub largest_ds_ttl: u32,
    /// Whether a parent query has answered with a DS since it was last published: a DS
    /// published and withdrawn between two looks cannot be seen by any poller, and the
    /// margin, not the oracle, is what covers it.
    pub ds_seen: bool,
    /// After this many more parent queries, the registrar re-publishes the DS on server 0
    /// (a DS reappearing between the engine's step and its provider call).
    pub ds_reappears_after: Option<u32>,
    /// What the validation probes say (none by default: the verdict is unknown).
    pub validation: Vec<ValidationProbe>,
    /// The expiration (Unix seconds) of the RRSIG the child servers give over the
    /// DNSKEY set; never by default.
    pub signature_expiration: u32,
}

#[derive(Clone)]
pub struct FakeWorld {
    state: Arc<Mutex<WorldState>>,
    pub clock: ManualClock,
}

impl FakeWorld {
    pub fn new(zone: &str, parents: usize, children: usize, clock: ManualClock) -> Self {
        Self {
            state: Arc::new(Mutex::new(WorldState {
                zone: zone.to_string(),
                dnssec_on: false,
                key: None,
                provider_failures: 0,
                zone_missing: false,
                switches_lose_answer: 0,
                provider_delay: std::time::Duration::ZERO,
                parents: vec![ParentServer::default(); parents],
                children: vec![ChildServer::default(); children],
                switches: Vec::new(),
                violations: Vec::new(),
                ds_gone_at: None,
                largest_ds_ttl: 0,
                ds_seen: false,
                ds_reappears_after: None,
                validation: Vec::new(),
                signature_expiration: u32::MAX,
            })),
            clock,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, WorldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The registrar publishes the provider's current DS on parent server `i`.
    pub fn publish_ds(&self, i: usize, ttl: u32) {
        let mut s = self.lock();
        let Some(key) = s.key.clone() else { return };
        let zone = s.zone.clone();
        if let (Some(server), Ok(ds)) = (s.parents.get_mut(i), key.to_ds(&zone, DigestType::Sha256))
        {
            server.ds = Some((vec![ds], ttl));
        }
        s.largest_ds_ttl = s.largest_ds_ttl.max(ttl);
    }

    /// A DS for a key nobody serves (a typo at the registrar).
    pub fn publish_wrong_ds(&self, i: usize, ttl: u32) {
        // Resolvers may cache what a server published, whether or not we saw it.
        let mut s = self.lock();
        let zone = s.zone.clone();
        if let (Some(server), Ok(key)) = (s.parents.get_mut(i), LabKey::generate(257))
            && let Ok(ds) = Dnskey::from(key.dnskey()).to_ds(&zone, DigestType::Sha256)
        {
            server.ds = Some((vec![ds], ttl));
        }
        s.largest_ds_ttl = s.largest_ds_ttl.max(ttl);
    }

    pub fn withdraw_ds(&self, i: usize) {
        let now = self.clock.now();
        let mut s = self.lock();
        let had = s.parents.iter().any(|p| p.ds.is_some());
        if let Some(server) = s.parents.get_mut(i) {
            server.ds = None;
        }
        if had && s.parents.iter().all(|p| p.ds.is_none()) && s.ds_seen {
            s.ds_gone_at = Some(now);
            s.ds_seen = false;
        }
    }

    /// Someone switches DNSSEC at the provider behind the daemon's back (no invariant is
    /// checked: it is not the daemon's call). On gives a new key if there is none.
    pub fn flip_dnssec(&self, on: bool) {
        let mut s = self.lock();
        if on && s.key.is_none() {
            s.key = LabKey::generate(257).ok().map(|k| k.dnskey().into());
        }
        if !on {
            s.key = None;
        }
        s.dnssec_on = on;
    }

    /// The provider rolls to a new key while signing (no-op when off).
    pub fn rekey(&self) {
        let mut s = self.lock();
        if s.dnssec_on {
            s.key = LabKey::generate(257).ok().map(|k| k.dnskey().into());
        }
    }

    /// Ground truth for safety rule 8: the DS line a correct daemon may show "to enter"
    /// now (the provider signs with that key and every child server answers with it).
    pub fn enterable_ds(&self) -> Option<String> {
        let s = self.lock();
        let key = s.key.as_ref().filter(|_| s.dnssec_on)?;
        let served = s.children.iter().all(|c| !c.lagging && !c.silent);
        let line = provider_key(&s.zone, key).ok()?.ds_line().to_string();
        served.then_some(line)
    }

    pub fn any_ds(&self) -> bool {
        self.lock().parents.iter().any(|p| p.ds.is_some())
    }

    pub fn dnssec_on(&self) -> bool {
        self.lock().dnssec_on
    }

    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    pub fn switches(&self) -> Vec<(Timestamp, bool)> {
        self.lock().switches.clone()
    }
}

fn provider_key(zone: &str, key: &Dnskey) -> Result<DnssecKey, ProviderError> {
    Ok(DnssecKey {
        zone: zone.to_string(),
        dnskey: key.clone(),
        ds: key
            .to_ds(zone, DigestType::Sha256)
            .map_err(|e| ProviderError::Invalid(e.to_string()))?,
        ds_ttl: 3600,
        uuid: None,
    })
}

impl FakeWorld {
    fn provider_fault(&self) -> Result<(), ProviderError> {
        let mut s = self.lock();
        if s.zone_missing {
            return Err(ProviderError::NotFound("zone is not found".into()));
        }
        if s.provider_failures > 0 {
            s.provider_failures -= 1;
            return Err(ProviderError::Server {
                status: 503,
                message: "injected".into(),
            });
        }
        Ok(())
    }
}

impl Provider for FakeWorld {
    async fn get_zone(&self, zone: &str) -> Result<ProviderZone, ProviderError> {
        self.provider_fault()?;
        Ok(ProviderZone {
            name: zone.trim_end_matches('.').to_string(),
            id: Some(1),
            enabled: Some(true),
            status: None,
            dnssec_enabled: Some(self.dnssec_on()),
            dnssec_status: None,
            dnssec_status_modified_on: None,
            // The provider's name servers: the child servers (the parent delegates to
            // them).
            records: vec![ZoneRecordSummary {
                name: zone.trim_end_matches('.').to_string(),
                rtype: "NS".into(),
                ttl: Some(3600),
                short_answers: self
                    .name_servers(zone)
                    .into_iter()
                    .map(serde_json::Value::from)
                    .collect(),
            }],
        })
    }

    async fn list_zones(&self) -> Result<Vec<ProviderZone>, ProviderError> {
        let zone = self.lock().zone.clone();
        Ok(vec![self.get_zone(&zone).await?])
    }

    async fn set_dnssec(&self, zone: &str, enabled: bool) -> Result<DnssecSwitched, ProviderError> {
        self.provider_fault()?;
        let now = self.clock.now();
        let mut s = self.lock();
        if !enabled && s.dnssec_on {
            if let Some(i) = s.parents.iter().position(|p| p.ds.is_some()) {
                let v =
                    format!("DNSSEC switched off at {now} while parent server {i} publishes a DS");
                s.violations.push(v);
            }
            if let Some(gone) = s.ds_gone_at {
                // A resolver may validate the DNSKEY with the DS at the DS's last moment,
                // then trust the key for the DNSKEY TTL.
                let allowed = gone.plus_secs(s.largest_ds_ttl + DNSKEY_TTL);
                if now < allowed {
                    let v = format!(
                        "DNSSEC switched off at {now}, before {allowed} (DS gone at {gone} + DS TTL + DNSKEY TTL): resolvers may still hold it"
                    );
                    s.violations.push(v);
                }
            }
        }
        if enabled && s.key.is_none() {
            s.key = LabKey::generate(257).ok().map(|k| k.dnskey().into());
        }
        if !enabled {
            s.key = None;
        }
        s.dnssec_on = enabled;
        s.switches.push((now, enabled));
        if s.switches_lose_answer > 0 {
            s.switches_lose_answer -= 1;
            return Err(ProviderError::Transport(
                "operation timed out (the answer was lost)".into(),
            ));
        }
        let key = match (&s.key, enabled) {
            (Some(k), true) => Some(provider_key(zone, k)?),
            _ => None,
        };
        Ok(DnssecSwitched { message: None, key })
    }

    async fn get_dnssec(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        let delay = self.lock().provider_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.provider_fault()?;
        let s = self.lock();
        match (&s.key, s.dnssec_on) {
            (Some(key), true) => provider_key(zone, key),
            _ => Err(ProviderError::DnssecDisabled),
        }
    }

    async fn list_rrsets(&self, _zone: &str) -> Result<Vec<Rrset>, ProviderError> {
        self.provider_fault()?;
        Ok(vec![])
    }

    async fn get_parent_ds(&self, _zone: &str) -> Result<ParentDsHint, ProviderError> {
        Ok(ParentDsHint {
            has_valid_parent_ds: self.any_ds(),
            parent_zone: None,
            scanned_at: None,
        })
    }
}

/// The child servers' names: the provider's name servers for the zone.
fn children_names(zone: &str, count: usize) -> Vec<String> {
    (1..=count).map(|i| format!("ns{i}.{zone}")).collect()
}

impl FakeWorld {
    fn name_servers(&self, zone: &str) -> Vec<String> {
        let zone = if zone.ends_with('.') {
            zone.to_string()
        } else {
            format!("{zone}.")
        };
        children_names(&zone, self.lock().children.len())
    }
}

impl Observer for FakeWorld {
    async fn parent(&self, zone: &str) -> Result<ParentView, ObserveError> {
        let countdown = self.lock().ds_reappears_after;
        match countdown {
            Some(0) => {
                self.lock().ds_reappears_after = None;
                self.publish_ds(0, 3600);
            }
            Some(n) => self.lock().ds_reappears_after = Some(n - 1),
            None => {}
        }
        let mut s = self.lock();
        if s.parents.iter().any(|p| p.ds.is_some() && !p.silent) {
            s.ds_seen = true;
        }
        Ok(ParentView {
            zone: zone.to_string(),
            parent: "test.".into(),
            delegations: s
                .parents
                .iter()
                .enumerate()
                .map(|(i, p)| ServerAnswer {
                    server: format!("ns{}.test.", i + 1),
                    addr: std::net::IpAddr::from([127, 0, 0, u8::try_from(i + 1).unwrap_or(1)]),
                    answer: if p.silent {
                        NsAnswer::Unknown(UnknownReason::Timeout)
                    } else {
                        NsAnswer::Servers {
                            hosts: ns_set(children_names(zone, s.children.len())),
                            ttl: 3600,
                        }
                    },
                })
                .collect(),
            answers: s
                .parents
                .iter()
                .enumerate()
                .map(|(i, p)| ServerAnswer {
                    server: format!("ns{}.test.", i + 1),
                    addr: std::net::IpAddr::from([127, 0, 0, u8::try_from(i + 1).unwrap_or(1)]),
                    answer: match (&p.ds, p.silent) {
                        (_, true) => DsAnswer::Unknown(UnknownReason::Timeout),
                        (Some((ds, ttl)), false) => DsAnswer::Present {
                            ds: ds.clone(),
                            ttl: *ttl,
                        },
                        (None, false) => DsAnswer::Absent,
                    },
                })
                .collect(),
        })
    }

    async fn child(&self, zone: &str) -> Result<ChildView, ObserveError> {
        let s = self.lock();
        Ok(ChildView {
            zone: zone.to_string(),
            apex_ns: vec![],
            answers: s
                .children
                .iter()
                .enumerate()
                .map(|(i, c)| ServerAnswer {
                    server: format!("ns{}.{zone}", i + 1),
                    addr: std::net::IpAddr::from([127, 0, 1, u8::try_from(i + 1).unwrap_or(1)]),
                    answer: match (&s.key, s.dnssec_on && !c.lagging, c.silent) {
                        (_, _, true) => DnskeyAnswer::Unknown(UnknownReason::Timeout),
                        (Some(key), true, false) => DnskeyAnswer::Keys(ChildKeys {
                            keys: vec![key.clone()],
                            ttl: DNSKEY_TTL,
                            signed: true,
                            signatures: vec![SignatureWindow {
                                key_tag: key.key_tag(),
                                inception: 0,
                                expiration: s.signature_expiration,
                            }],
                            cds: vec![],
                            cdnskey: vec![],
                            delete_requested: false,
                        }),
                        _ => DnskeyAnswer::Absent,
                    },
                })
                .collect(),
        })
    }

    async fn validation(&self, _zone: &str) -> Vec<ValidationProbe> {
        self.lock().validation.clone()
    }
}
