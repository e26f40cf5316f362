//! The fleet page's data: every zone's line, read from the store in one pass and kept
//! while it is fresh, so that filtering, searching and paging 100,000 zones is a walk over
//! memory, not a query per request. A request finds the snapshot stale and starts a new
//! read in the background; it is served the one in hand, which says when it was taken.
//! Fresh for `FRESH_FOR`, or ten times as long as the last read took, whichever is longer:
//! someone watching the page costs the daemon at most a tenth of a core.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use strum::VariantArray;

use crate::lifecycle::{AlertKind, Intent, Policy, Severity, State, Timestamp};
use crate::store::{AlertRow, Store, StoreError, ZoneRow, host_ipv6};

/// How old a snapshot may be before a request starts a new read (at least).
pub const FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(5);
/// A snapshot stays fresh this many times as long as its read took.
const FRESH_PER_READ: u32 = 10;
/// Lines on a page.
pub const PAGE_SIZE: usize = 50;
/// A search longer than this is cut (a name is at most 253 characters).
const MAX_SEARCH: usize = 253;

/// One zone as the fleet page lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub name: String,
    pub state: Option<State>,
    pub intent: Intent,
    pub provider: Option<String>,
    pub delegation: &'static str,
    pub waiting_for: String,
    pub waiting_on: &'static str,
    /// The party in words, a provider by the account the wait is on (`Waiting::party`).
    pub waiting_party: String,
    pub until: Option<Timestamp>,
    pub since: Timestamp,
    /// Open alerts: kind and severity, worst first.
    pub alerts: Vec<(AlertKind, Severity)>,
}

impl Line {
    fn from_row(row: &ZoneRow, alerts: &[&AlertRow], policy: &Policy, ipv6: Option<&str>) -> Self {
        let waiting = row.waiting(policy, ipv6);
        let mut alerts: Vec<(AlertKind, Severity)> =
            alerts.iter().map(|a| (a.kind, a.severity)).collect();
        alerts.sort_by_key(|(kind, severity)| (*severity != Severity::Critical, kind.as_str()));
        Self {
            name: row.zone.name.to_string(),
            state: row.zone.state,
            intent: row.zone.intent,
            provider: row.account().map(str::to_string),
            delegation: row
                .zone
                .facts
                .delegation
                .verdict
                .map_or("unknown", |d| d.as_str()),
            waiting_party: waiting.party(),
            waiting_for: waiting.what,
            waiting_on: waiting.on,
            until: waiting.until,
            since: row.zone.since,
            alerts,
        }
    }

    /// The operator's own steps: at the operator, or at the registrar (a person there).
    pub fn waits_on_me(&self) -> bool {
        matches!(self.waiting_on, "operator" | "registrar")
    }
}

/// Every zone, by name, as read at `taken_at`.
#[derive(Debug)]
pub struct Snapshot {
    pub lines: Vec<Line>,
    pub taken_at: Timestamp,
    /// How long the read took.
    pub took: std::time::Duration,
}

impl Snapshot {
    /// Reads every zone and its open alerts (one pass over each table).
    pub async fn read(store: &Store, policy: &Policy, now: Timestamp) -> Result<Self, StoreError> {
        let started = std::time::Instant::now();
        let alerts = store.open_alerts(None).await?;
        let mut by_zone: HashMap<&str, Vec<&AlertRow>> = HashMap::new();
        for a in &alerts {
            by_zone.entry(a.zone.as_str()).or_default().push(a);
        }
        let daemon = store.daemon_alerts_open().await?;
        let ipv6 = host_ipv6(&daemon);
        let mut lines = Vec::new();
        store
            .each_zone_brief::<StoreError>(&mut |row| {
                let open = by_zone
                    .get(row.zone.name.as_str())
                    .map_or(&[][..], Vec::as_slice);
                lines.push(Line::from_row(&row, open, policy, ipv6));
                Ok(())
            })
            .await?;
        Ok(Self {
            lines,
            taken_at: now,
            took: started.elapsed(),
        })
    }

    /// The lines `filter` selects, one page of them, and how many there are in all.
    pub fn select(&self, filter: &Filter) -> Selection<'_> {
        let search = filter.search.to_ascii_lowercase();
        let matching = self.lines.iter().filter(|l| filter.admits(l, &search));
        let mut total = 0;
        let mut page = Vec::with_capacity(PAGE_SIZE);
        let skip = filter.page.saturating_mul(PAGE_SIZE);
        for line in matching {
            if total >= skip && page.len() < PAGE_SIZE {
                page.push(line);
            }
            total += 1;
        }
        Selection {
            lines: page,
            total,
            counts: self.counts(),
        }
    }

    /// How many zones are in each state, wait on the operator, have an alert.
    fn counts(&self) -> Counts {
        let mut counts = Counts {
            all: self.lines.len(),
            ..Counts::default()
        };
        for line in &self.lines {
            if let Some(at) = line
                .state
                .and_then(|s| State::VARIANTS.iter().position(|v| *v == s))
            {
                counts.by_state[at] += 1;
            }
            counts.waits_on_me += usize::from(line.waits_on_me());
            counts.alerting += usize::from(!line.alerts.is_empty());
        }
        counts
    }
}

/// What the fleet page shows: a state, the zones waiting on the operator, those with an
/// open alert, a search in the names; a page of them (from 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub state: Option<State>,
    pub waits_on_me: bool,
    pub alerting: bool,
    pub search: String,
    pub page: usize,
}

impl Filter {
    /// The filter from the page's query parameters; an unknown state is an error naming it.
    pub fn parse(
        state: Option<&str>,
        on: Option<&str>,
        alert: Option<&str>,
        q: Option<&str>,
        page: Option<&str>,
    ) -> Result<Self, String> {
        let state = match state.filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(
                s.parse::<State>()
                    .map_err(|_| format!("{s:?} is not a state"))?,
            ),
        };
        let page = match page.filter(|p| !p.is_empty()) {
            None => 0,
            Some(p) => p
                .parse::<usize>()
                .ok()
                .filter(|p| *p >= 1 && *p <= 1_000_000)
                .map(|p| p - 1)
                .ok_or_else(|| format!("{p:?} is not a page number"))?,
        };
        let search: String = q
            .unwrap_or_default()
            .trim()
            .chars()
            .take(MAX_SEARCH)
            .collect();
        Ok(Self {
            state,
            waits_on_me: on == Some("me"),
            alerting: alert == Some("open"),
            search,
            page,
        })
    }

    fn admits(&self, line: &Line, search: &str) -> bool {
        self.state.is_none_or(|s| line.state == Some(s))
            && (!self.waits_on_me || line.waits_on_me())
            && (!self.alerting || !line.alerts.is_empty())
            && (search.is_empty() || line.name.contains(search))
    }
}

/// One page of the fleet.
pub struct Selection<'a> {
    pub lines: Vec<&'a Line>,
    /// The lines the filter admits, on every page.
    pub total: usize,
    pub counts: Counts,
}

/// The fleet at a glance, whatever the filter.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub all: usize,
    pub by_state: [usize; State::VARIANTS.len()],
    pub waits_on_me: usize,
    pub alerting: usize,
}

/// The snapshot in hand and whether a read is under way.
#[derive(Default)]
pub struct Fleet {
    current: Mutex<Option<Arc<Snapshot>>>,
    reading: Arc<tokio::sync::Mutex<()>>,
    /// Set by a switch; cleared by the read it starts.
    stale: std::sync::atomic::AtomicBool,
}

impl Fleet {
    /// The snapshot to serve: the one in hand when fresh; when stale, still that one, a
    /// new read started beside it; with none yet, read now.
    pub async fn get(
        self: &Arc<Self>,
        store: &Store,
        policy: &Policy,
        now: Timestamp,
    ) -> Result<Arc<Snapshot>, StoreError> {
        let held = self.held();
        match held {
            Some(snapshot) if !self.is_stale(&snapshot, now) => Ok(snapshot),
            Some(snapshot) => {
                if let Ok(guard) = self.reading.clone().try_lock_owned() {
                    self.stale
                        .store(false, std::sync::atomic::Ordering::Relaxed);
                    let fleet = self.clone();
                    let (store, policy) = (store.clone(), policy.clone());
                    tokio::spawn(async move {
                        let _guard = guard;
                        match Snapshot::read(&store, &policy, now).await {
                            Ok(s) => {
                                fleet.put(s);
                            }
                            Err(error) => tracing::warn!(%error, "web: cannot read the fleet"),
                        }
                    });
                }
                Ok(snapshot)
            }
            None => {
                let _guard = self.reading.lock().await;
                if let Some(snapshot) = self.held() {
                    return Ok(snapshot);
                }
                let snapshot = Snapshot::read(store, policy, now).await?;
                Ok(self.put(snapshot))
            }
        }
    }

    /// The operator changed an intent: the next page starts a new read (and is served
    /// the snapshot in hand meanwhile, which says when it was taken).
    pub fn invalidate(&self) {
        self.stale.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    fn is_stale(&self, snapshot: &Snapshot, now: Timestamp) -> bool {
        let fresh_for = FRESH_FOR.max(snapshot.took.saturating_mul(FRESH_PER_READ));
        self.stale.load(std::sync::atomic::Ordering::Relaxed)
            || now.since(snapshot.taken_at) >= fresh_for
            || now < snapshot.taken_at
    }

    fn held(&self) -> Option<Arc<Snapshot>> {
        self.current.lock().ok().and_then(|c| c.clone())
    }

    fn put(&self, snapshot: Snapshot) -> Arc<Snapshot> {
        let snapshot = Arc::new(snapshot);
        if let Ok(mut current) = self.current.lock() {
            *current = Some(snapshot.clone());
        }
        snapshot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, state: Option<State>, on: &'static str, alerting: bool) -> Line {
        Line {
            name: name.to_string(),
            state,
            intent: Intent::None,
            provider: None,
            delegation: "provider",
            waiting_for: String::new(),
            waiting_on: on,
            waiting_party: on.to_string(),
            until: None,
            since: Timestamp(0),
            alerts: if alerting {
                vec![(AlertKind::DsMismatch, Severity::Critical)]
            } else {
                vec![]
            },
        }
    }

    fn snapshot(n: usize) -> Snapshot {
        let lines = (0..n)
            .map(|i| {
                let (state, on) = match i % 4 {
                    0 => (Some(State::AwaitingDs), "registrar"),
                    1 => (Some(State::Active), "nobody"),
                    2 => (Some(State::Disabled), "operator"),
                    _ => (None, "daemon"),
                };
                line(&format!("z{i:04}.test."), state, on, i % 10 == 3)
            })
            .collect();
        Snapshot {
            lines,
            taken_at: Timestamp(0),
            took: std::time::Duration::ZERO,
        }
    }

    #[test]
    fn filters_page_and_count_over_the_whole_fleet() {
        let s = snapshot(1000);
        let all = s.select(&Filter::default());
        assert_eq!(all.total, 1000);
        assert_eq!(all.lines.len(), PAGE_SIZE);
        assert_eq!(all.lines[0].name, "z0000.test.");
        assert_eq!(all.counts.all, 1000);
        // Waiting on me: the operator's steps and the registrar's (a person there).
        assert_eq!(all.counts.waits_on_me, 500);
        assert_eq!(all.counts.alerting, 100);
        let active = State::VARIANTS
            .iter()
            .position(|s| *s == State::Active)
            .unwrap();
        assert_eq!(all.counts.by_state[active], 250);

        let page3 = s.select(&Filter {
            page: 2,
            ..Filter::default()
        });
        assert_eq!(page3.lines[0].name, format!("z{:04}.test.", 2 * PAGE_SIZE));
        let me = s.select(&Filter {
            waits_on_me: true,
            ..Filter::default()
        });
        assert_eq!(me.total, 500);
        assert!(me.lines.iter().all(|l| l.waits_on_me()));
        let active_alerting = s.select(&Filter {
            state: Some(State::Active),
            alerting: true,
            ..Filter::default()
        });
        // i % 4 == 1 and i % 10 == 3: i = 13, 33, 53, …
        assert_eq!(active_alerting.total, 50);
        let found = s.select(&Filter {
            search: "Z0042".to_string(),
            ..Filter::default()
        });
        assert_eq!(found.total, 1, "case-insensitive, a part of the name");
        // Past the last page: nothing, and the total still said.
        let beyond = s.select(&Filter {
            page: 100,
            ..Filter::default()
        });
        assert!(beyond.lines.is_empty());
        assert_eq!(beyond.total, 1000);
    }

    /// A request never waits for a read while a snapshot is in hand: it is served that
    /// one and a read starts beside it once stale (by age, or by a switch).
    #[tokio::test]
    async fn a_stale_snapshot_is_served_while_a_new_one_is_read() {
        let store = Store::open_in_memory().await.unwrap();
        let policy = Policy::default();
        let t0 = Timestamp(1_800_000_000_000);
        store.ensure_zone("a.test.", t0).await.unwrap();
        let fleet = Arc::new(Fleet::default());
        let names = |s: &Snapshot| s.lines.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
        let first = fleet.get(&store, &policy, t0).await.unwrap();
        assert_eq!(names(&first), ["a.test."]);
        store.ensure_zone("b.test.", t0).await.unwrap();
        let at = |s: u64| t0.plus(std::time::Duration::from_secs(s));
        // Fresh: the same snapshot, no read.
        assert!(Arc::ptr_eq(
            &first,
            &fleet.get(&store, &policy, at(1)).await.unwrap()
        ));
        // Stale: still served, a read started beside it.
        let stale = fleet.get(&store, &policy, at(6)).await.unwrap();
        assert!(Arc::ptr_eq(&first, &stale));
        let mut read = None;
        for _ in 0..200 {
            let now = fleet.get(&store, &policy, at(6)).await.unwrap();
            if now.lines.len() == 2 {
                read = Some(now);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let read = read.expect("the read started by the stale request lands");
        assert_eq!(read.taken_at, at(6));
        // A switch makes it stale at once, whatever its age.
        store.ensure_zone("c.test.", t0).await.unwrap();
        fleet.invalidate();
        assert_eq!(
            fleet.get(&store, &policy, at(7)).await.unwrap().lines.len(),
            2
        );
        for _ in 0..200 {
            if fleet.get(&store, &policy, at(7)).await.unwrap().lines.len() == 3 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("the switch's read never landed");
    }

    #[test]
    fn the_query_is_parsed_strictly_and_bounded() {
        let f = Filter::parse(
            Some("active"),
            Some("me"),
            Some("open"),
            Some(" shop "),
            Some("3"),
        )
        .unwrap();
        assert_eq!(f.state, Some(State::Active));
        assert!(f.waits_on_me && f.alerting);
        assert_eq!(f.search, "shop");
        assert_eq!(f.page, 2);
        assert_eq!(
            Filter::parse(Some(""), None, None, None, Some("")).unwrap(),
            Filter::default()
        );
        assert!(
            Filter::parse(Some("bogus"), None, None, None, None)
                .unwrap_err()
                .contains("\"bogus\" is not a state")
        );
        for page in ["0", "-1", "x", "99999999999"] {
            assert!(
                Filter::parse(None, None, None, None, Some(page)).is_err(),
                "{page}"
            );
        }
        let long = "a".repeat(10_000);
        assert_eq!(
            Filter::parse(None, None, None, Some(&long), None)
                .unwrap()
                .search
                .len(),
            MAX_SEARCH
        );
    }
}
