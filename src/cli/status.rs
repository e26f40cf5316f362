//! `status` and `history`: read the database (works while the daemon runs). They open
//! it read-only and never create it: "no database at PATH" before the daemon's first run
//! (SQLite), a schema the daemon has not migrated yet refused (both stores).

use std::collections::HashMap;
use std::fmt::Write;

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::Settings;
use crate::dns::DelegationVerdict;
use crate::lifecycle::waiting::{Waiting, describe};
use crate::lifecycle::{Clock, Policy, State, SystemClock, Timestamp};
use crate::store::{AlertRow, EventRow, Store, StoreError, ZoneRow};

/// `status` could not read the database, or not write its answer.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the status: {0}")]
    Output(#[from] std::io::Error),
}

/// The database named by the settings, for reading only.
pub async fn open_store(settings: &Settings) -> Result<Store, StoreError> {
    Store::connect_read_only(&settings.database).await
}

/// An open alert as `status --json` shows it. Every object of `status --json` is written
/// with its keys in alphabetical order (the order of the fields here).
#[derive(Serialize)]
struct AlertJson<'a> {
    kind: &'static str,
    message: &'a str,
    severity: &'static str,
    since: String,
}

impl<'a> From<&'a AlertRow> for AlertJson<'a> {
    fn from(a: &'a AlertRow) -> Self {
        Self {
            kind: a.kind.as_str(),
            message: &a.message,
            severity: a.severity.as_str(),
            since: a.opened_at.to_string(),
        }
    }
}

/// What the zone waits for; a provider that answered "no such zone" at the last look is
/// said plainly, whatever the state (a definite answer, not an unknown).
fn waiting(row: &ZoneRow, policy: &Policy) -> Waiting {
    let missing = row
        .last_observation
        .as_ref()
        .and_then(|o| o.pointer("/provider/dnssec"))
        .is_some_and(|v| v == "not_found");
    if missing {
        return Waiting {
            what: format!(
                "the zone to exist at the provider: it answers that it has no zone {}",
                row.zone.name
            ),
            on: "operator",
            until: None,
        };
    }
    describe(&row.zone, policy)
}

/// How the parent's answers at the last look could be trusted (safety rule 10):
/// `validated`, `insecure` (the parent zone is unsigned: unvalidated), `unchecked` (a
/// routine look), with the reason for `insecure`.
fn evidence(row: &ZoneRow) -> (Option<&str>, Option<&str>) {
    let at = row
        .last_observation
        .as_ref()
        .and_then(|o| o.pointer("/parent/evidence"));
    (
        at.and_then(|e| e.get("kind")).and_then(Value::as_str),
        at.and_then(|e| e.get("detail")).and_then(Value::as_str),
    )
}

/// The provider's failure at the last observation, if it could not be asked.
fn provider_error(row: &ZoneRow) -> Option<&str> {
    row.last_observation
        .as_ref()
        .and_then(|o| o.pointer("/provider/error"))
        .and_then(Value::as_str)
}

/// The daemon holding the zone (several daemons on PostgreSQL), while its lease lasts.
fn lease(row: &ZoneRow, now: crate::lifecycle::Timestamp) -> Option<&crate::store::LeaseInfo> {
    row.lease.as_ref().filter(|l| l.until > now)
}

/// Open alerts by zone: looked up once per zone, not searched for.
fn by_zone(alerts: &[AlertRow]) -> HashMap<&str, Vec<&AlertRow>> {
    let mut map: HashMap<&str, Vec<&AlertRow>> = HashMap::new();
    for a in alerts {
        map.entry(a.zone.as_str()).or_default().push(a);
    }
    map
}

#[derive(Serialize)]
struct LeaseJson<'a> {
    epoch: i64,
    holder: &'a str,
    since: String,
    until: String,
}

/// One zone of `status --json`, serialized straight to the output (no JSON tree is built
/// for 100,000 zones).
#[derive(Serialize)]
struct ZoneJson<'a> {
    alerts: Vec<AlertJson<'a>>,
    delegation: &'static str,
    ds: Option<&'a str>,
    ds_to_enter: Option<&'a str>,
    evidence: Option<&'a str>,
    intent: &'static str,
    last_observed: Option<String>,
    lease: Option<LeaseJson<'a>>,
    next_check: String,
    provider_error: Option<&'a str>,
    provider_ns: Option<&'a [String]>,
    since: String,
    state: Option<&'static str>,
    until: Option<String>,
    waiting_for: String,
    waiting_on: &'static str,
    zone: &'a str,
}

fn zone_json<'a>(
    row: &'a ZoneRow,
    alerts: &[&'a AlertRow],
    policy: &Policy,
    now: Timestamp,
) -> ZoneJson<'a> {
    let z = &row.zone;
    let waiting = waiting(row, policy);
    ZoneJson {
        alerts: alerts.iter().map(|a| AlertJson::from(*a)).collect(),
        delegation: z.facts.delegation.map_or("unknown", |d| d.as_str()),
        ds: z.facts.ds_line.as_deref(),
        ds_to_enter: z.facts.ds_to_enter.as_deref(),
        evidence: evidence(row).0,
        intent: z.intent.as_str(),
        last_observed: row.last_observed_at.map(|t| t.to_string()),
        lease: lease(row, now).map(|l| LeaseJson {
            epoch: l.epoch,
            holder: &l.holder,
            since: l.since.to_string(),
            until: l.until.to_string(),
        }),
        next_check: row.next_check_at.to_string(),
        provider_error: provider_error(row),
        provider_ns: z.facts.provider_ns.as_deref(),
        since: z.since.to_string(),
        state: z.state.map(State::as_str),
        until: waiting.until.map(|t| t.to_string()),
        waiting_for: waiting.what,
        waiting_on: waiting.on,
        zone: &z.name,
    }
}

/// `status --json`: `{"zones":[…]}`; with a zone, that zone's object alone (`None`: no
/// such zone).
pub async fn status_json(
    store: &Store,
    zone: Option<&str>,
    policy: &Policy,
) -> Result<Option<Value>, StatusError> {
    let mut out = Vec::new();
    if !write_status_json(store, zone, policy, &mut out).await? {
        return Ok(None);
    }
    Ok(Some(
        serde_json::from_slice(&out).map_err(std::io::Error::from)?,
    ))
}

/// Writes `status --json` (pretty-printed) to `out`; false when `zone` is not known.
pub async fn write_status_json(
    store: &Store,
    zone: Option<&str>,
    policy: &Policy,
    out: &mut dyn std::io::Write,
) -> Result<bool, StatusError> {
    let alerts = store.open_alerts(zone).await?;
    let alerts = by_zone(&alerts);
    let now = SystemClock.now();
    let of = |row: &ZoneRow| -> Vec<&AlertRow> {
        alerts
            .get(row.zone.name.as_str())
            .cloned()
            .unwrap_or_default()
    };
    let written = match zone {
        Some(name) => match store.zone(name).await? {
            Some(row) => {
                let open = of(&row);
                serde_json::to_writer_pretty(&mut *out, &zone_json(&row, &open, policy, now))
            }
            None => return Ok(false),
        },
        None => {
            #[derive(Serialize)]
            struct Doc<'a> {
                zones: Vec<ZoneJson<'a>>,
            }
            let rows = store.zones_brief().await?;
            let open: Vec<Vec<&AlertRow>> = rows.iter().map(of).collect();
            let zones = rows
                .iter()
                .zip(&open)
                .map(|(row, open)| zone_json(row, open, policy, now))
                .collect();
            serde_json::to_writer_pretty(&mut *out, &Doc { zones })
        }
    };
    written.map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(true)
}

/// The status table.
pub async fn status_text(
    store: &Store,
    zone: Option<&str>,
    policy: &Policy,
) -> Result<Option<String>, StoreError> {
    let rows = match zone {
        Some(name) => match store.zone(name).await? {
            Some(row) => vec![row],
            None => return Ok(None),
        },
        None => store.zones_brief().await?,
    };
    let alerts = store.open_alerts(zone).await?;
    let alerts = by_zone(&alerts);
    let now = SystemClock.now();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:<20} {:<10} {:<22} WAITING FOR",
        "ZONE", "STATE", "INTENT", "SINCE"
    );
    for row in &rows {
        let z = &row.zone;
        let w = waiting(row, policy);
        let until = w
            .until
            .map(|t| format!(" (until {t}{})", if t < now { ", overdue" } else { "" }))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<28} {:<20} {:<10} {:<22} {} [on: {}]{}",
            z.name,
            z.state.map_or("(not observed yet)", State::as_str),
            z.intent.as_str(),
            z.since.to_string(),
            w.what,
            w.on,
            until
        );
        if let Some(error) = provider_error(row) {
            let _ = writeln!(out, "{:<28} PROVIDER: {error}", "");
        }
        if let Some(l) = lease(row, now) {
            let _ = writeln!(
                out,
                "{:<28} HELD BY: {} since {} (epoch {})",
                "", l.holder, l.since, l.epoch
            );
        }
        if let (Some("insecure"), why) = evidence(row) {
            let _ = writeln!(
                out,
                "{:<28} EVIDENCE: unvalidated (the parent zone is unsigned: {})",
                "",
                why.unwrap_or("provably insecure")
            );
        }
        // Said whenever the parent does not (only) send resolvers to the provider.
        if let Some(d @ (DelegationVerdict::Foreign | DelegationVerdict::Mixed)) =
            z.facts.delegation
        {
            let _ = writeln!(
                out,
                "{:<28} DELEGATION: {d} (elsewhere: {}; the provider's: {})",
                "",
                crate::dns::delegation::describe(&z.facts.old_ns),
                z.facts
                    .provider_ns
                    .as_deref()
                    .map_or_else(|| "unknown".to_string(), crate::dns::delegation::describe)
            );
        }
        for a in alerts.get(z.name.as_str()).into_iter().flatten() {
            let _ = writeln!(
                out,
                "{:<28} ALERT {} ({}) since {}: {}",
                "",
                a.kind,
                a.severity.as_str(),
                a.opened_at,
                a.message
            );
        }
    }
    if rows.is_empty() {
        out.push_str("(no zones yet: list them in [zones] or run `dnssec-warden enable ZONE`)\n");
    }
    Ok(Some(out))
}

fn event_json(e: &EventRow) -> Value {
    json!({
        "at": e.at.to_string(),
        "kind": e.kind,
        "from": e.from,
        "to": e.to,
        "reason": e.reason,
        "repeats": e.repeats,
        "last_seen": e.last_seen.map(|t| t.to_string()),
        "holder": e.holder,
        "epoch": e.epoch,
    })
}

pub async fn history_json(store: &Store, zone: &str) -> Result<Value, StoreError> {
    let events = store.events(zone).await?;
    Ok(json!({
        "zone": zone,
        "events": events.iter().map(event_json).collect::<Vec<_>>(),
    }))
}

/// The audit trail as a story: one line per event, transitions marked.
pub async fn history_text(store: &Store, zone: &str) -> Result<String, StoreError> {
    let events = store.events(zone).await?;
    let mut out = String::new();
    let mut last_day = String::new();
    for e in &events {
        let at = e.at.to_string();
        let (day, time) = at.split_at(10);
        if day != last_day {
            let _ = writeln!(out, "{day}");
            last_day = day.to_string();
        }
        let time = time.trim_start_matches('T').trim_end_matches('Z');
        let line = match (e.kind.as_str(), &e.from, &e.to) {
            ("transition", from, Some(to)) => format!(
                "{} -> {to}: {}",
                from.as_deref().unwrap_or("(new)"),
                e.reason
            ),
            ("intent", _, _) => format!("operator: {}", e.reason),
            ("guard", _, _) => format!("SAFETY GUARD: {}", e.reason),
            (_, _, _) => e.reason.clone(),
        };
        let line = match e.last_seen {
            Some(last) if e.repeats > 0 => {
                format!("{line} (seen {} more times, last at {last})", e.repeats)
            }
            _ => line,
        };
        // Several daemons: who wrote it, under which lease epoch.
        let by = match (&e.holder, e.epoch) {
            (Some(holder), Some(epoch)) => format!(" [{holder}, epoch {epoch}]"),
            _ => String::new(),
        };
        let _ = writeln!(out, "  {time}  {line}{by}");
    }
    if events.is_empty() {
        let _ = writeln!(out, "no history for {zone}");
    }
    Ok(out)
}
