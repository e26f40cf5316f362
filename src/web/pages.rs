//! The console's pages, rendered on the server (maud: HTML compiled with the binary,
//! every value escaped). No inline script or style: the page's Content-Security-Policy
//! allows only the console's own stylesheet and copy script.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::Value;
use strum::VariantArray;

use super::fleet::{Filter, Line, PAGE_SIZE, Selection, Snapshot};
use crate::dns::{DsAnswer, NsAnswer, ParentView};
use crate::lifecycle::waiting::{Waiting, roll_line};
use crate::lifecycle::{Intent, State, Timestamp};
use crate::store::{AlertRow, EventRow, ZoneRow};

/// Who is looking, and the token their forms carry.
pub struct Viewer<'a> {
    pub user: &'a str,
    pub role: &'static str,
    pub operator: bool,
    pub csrf: &'a str,
}

/// What the switch may record, each confirmed in the words of the provider's own rules for
/// the switch (docs/gcore-api.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    Enable,
    Disable,
    /// From `awaiting_ds`: the DS was never entered, so its removal is not waited for.
    DisableNeverSubmitted,
}

impl Switch {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "enable" => Some(Self::Enable),
            "disable" => Some(Self::Disable),
            "disable-never-submitted" => Some(Self::DisableNeverSubmitted),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enable => "enable",
            Self::Disable => "disable",
            Self::DisableNeverSubmitted => "disable-never-submitted",
        }
    }

    pub fn intent(self) -> Intent {
        match self {
            Self::Enable => Intent::Enabled,
            Self::Disable | Self::DisableNeverSubmitted => Intent::Disabled,
        }
    }

    /// The command line that records the same intent.
    fn command(self) -> &'static str {
        match self {
            Self::Enable => "enable",
            Self::Disable => "disable",
            Self::DisableNeverSubmitted => "disable --ds-never-submitted",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::Enable => "Enable DNSSEC",
            Self::Disable => "Disable DNSSEC",
            Self::DisableNeverSubmitted => "Disable DNSSEC: the DS was never submitted",
        }
    }

    /// The consequence, stated before the operator confirms.
    fn consequence(self) -> &'static str {
        match self {
            Self::Enable => {
                "The provider signs the zone; once every name server serves the key, the DS \
                 to enter at the registrar is shown here (or the registry takes it from the \
                 zone's CDS). The DS record must then be entered at the registrar, which can \
                 take up to 24 hours to take effect and usually takes about an hour."
            }
            Self::Disable => {
                "Remove the DS at the registrar first; DNSSEC stays on until every parent \
                 server has dropped it and its TTL has passed. If DNSSEC were disabled while \
                 the DS record remains in the parent zone, resolvers would try to validate \
                 signatures that no longer exist and the domain would suffer an outage: the \
                 daemon switches it off only after that wait."
            }
            Self::DisableNeverSubmitted => {
                "You state that the DS shown was never entered at the registrar, so the \
                 daemon does not wait for its removal. Every parent server is still asked: \
                 if one publishes a DS after all, DNSSEC stays on until it has been removed \
                 and its TTL has passed."
            }
        }
    }

    /// Whether this switch applies to the zone as it stands.
    pub fn applies(self, state: Option<State>, intent: Intent) -> bool {
        match self {
            Self::Enable => intent != Intent::Enabled,
            Self::Disable => intent != Intent::Disabled,
            Self::DisableNeverSubmitted => state == Some(State::AwaitingDs),
        }
    }
}

fn page(title: &str, viewer: Option<&Viewer>, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · dnssec-warden" }
                link rel="stylesheet" href="/static/style.css";
                script src="/static/copy.js" defer {}
            }
            body {
                header {
                    span.brand { "dnssec-warden" }
                    @if let Some(v) = viewer {
                        a href="/zones" { "Zones" }
                        span.who { (v.user) " (" (v.role) ")" }
                        form method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(v.csrf);
                            button type="submit" { "Log out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
    .into_string()
}

/// The login form, with what went wrong at the last try.
pub fn login(error: Option<&str>) -> String {
    page(
        "Log in",
        None,
        html! {
            h1 { "Log in" }
            @if let Some(e) = error { p.error role="alert" { (e) } }
            form.login method="post" action="/login" {
                label { "User" input type="text" name="user" autocomplete="username" required autofocus; }
                label { "Password" input type="password" name="password" autocomplete="current-password" required; }
                button.primary type="submit" { "Log in" }
            }
        },
    )
}

/// A page that says what was wrong (the status is the response's).
pub fn error(viewer: Option<&Viewer>, title: &str, message: &str) -> String {
    page(
        title,
        viewer,
        html! {
            h1 { (title) }
            p.error { (message) }
            p { a href="/zones" { "Back to the zones" } }
        },
    )
}

fn state_badge(state: Option<State>) -> Markup {
    let name = state.map_or("not observed yet", State::as_str);
    html! { span class={ "state state-" (name) } { (name) } }
}

fn time(t: Timestamp) -> Markup {
    let text = t.to_string();
    html! { time datetime=(text) { (text.replace('T', " ")) } }
}

fn until(until: Option<Timestamp>, now: Timestamp) -> Markup {
    html! {
        @if let Some(t) = until {
            " until " (time(t))
            @if t < now { " " span.overdue { "overdue" } }
        }
    }
}

/// The fleet's link with one filter changed.
fn fleet_link(filter: &Filter) -> String {
    let mut query = Vec::new();
    if let Some(s) = filter.state {
        query.push(format!("state={}", s.as_str()));
    }
    if filter.waits_on_me {
        query.push("on=me".to_string());
    }
    if filter.alerting {
        query.push("alert=open".to_string());
    }
    if !filter.search.is_empty() {
        query.push(format!(
            "q={}",
            url::form_urlencoded::byte_serialize(filter.search.as_bytes()).collect::<String>()
        ));
    }
    if filter.page > 0 {
        query.push(format!("page={}", filter.page + 1));
    }
    if query.is_empty() {
        "/zones".to_string()
    } else {
        format!("/zones?{}", query.join("&"))
    }
}

fn zone_link(name: &str) -> String {
    format!(
        "/zones/{}",
        url::form_urlencoded::byte_serialize(name.as_bytes()).collect::<String>()
    )
}

/// Every zone, filtered and paged.
pub fn fleet(
    viewer: &Viewer,
    snapshot: &Snapshot,
    filter: &Filter,
    selection: &Selection,
    now: Timestamp,
) -> String {
    let counts = &selection.counts;
    let base = Filter {
        page: 0,
        ..filter.clone()
    };
    let pages = selection.total.div_ceil(PAGE_SIZE).max(1);
    let facet = |label: String, to: Filter, on: bool| {
        html! { a class=[on.then_some("on")] href=(fleet_link(&to)) { (label) } }
    };
    page(
        "Zones",
        Some(viewer),
        html! {
            h1 { "Zones" }
            p.facets {
                (facet(format!("All {}", counts.all), Filter { state: None, waits_on_me: false, alerting: false, ..base.clone() }, filter.state.is_none() && !filter.waits_on_me && !filter.alerting))
                (facet(format!("Waiting on me {}", counts.waits_on_me), Filter { waits_on_me: !filter.waits_on_me, ..base.clone() }, filter.waits_on_me))
                (facet(format!("With alerts {}", counts.alerting), Filter { alerting: !filter.alerting, ..base.clone() }, filter.alerting))
                @for (i, state) in State::VARIANTS.iter().enumerate() {
                    @if counts.by_state[i] > 0 {
                        (facet(format!("{} {}", state.as_str(), counts.by_state[i]), Filter { state: (filter.state != Some(*state)).then_some(*state), ..base.clone() }, filter.state == Some(*state)))
                    }
                }
            }
            form.filters method="get" action="/zones" {
                @if let Some(s) = filter.state { input type="hidden" name="state" value=(s.as_str()); }
                @if filter.waits_on_me { input type="hidden" name="on" value="me"; }
                @if filter.alerting { input type="hidden" name="alert" value="open"; }
                input type="search" name="q" value=(filter.search) placeholder="Search zone names" aria-label="Search zone names";
                button type="submit" { "Search" }
                span.muted { (selection.total) " zones match · as of " (time(snapshot.taken_at)) }
            }
            table #zones {
                thead { tr { th { "Zone" } th { "State" } th { "Intent" } th { "Provider" } th { "Delegation" } th { "Waiting for" } th { "On" } th { "Since" } th { "Alerts" } } }
                tbody {
                    @for line in &selection.lines { (fleet_row(line, now)) }
                }
            }
            @if selection.lines.is_empty() { p.muted { "No zone matches." } }
            nav.pager {
                @if filter.page > 0 { a href=(fleet_link(&Filter { page: filter.page - 1, ..filter.clone() })) { "← Previous" } }
                span { "Page " (filter.page + 1) " of " (pages) }
                @if filter.page + 1 < pages { a href=(fleet_link(&Filter { page: filter.page + 1, ..filter.clone() })) { "Next →" } }
            }
        },
    )
}

fn fleet_row(line: &Line, now: Timestamp) -> Markup {
    html! {
        tr {
            td { a.zone href=(zone_link(&line.name)) { (line.name) } }
            td { (state_badge(line.state)) }
            td { (line.intent.as_str()) }
            td { (line.provider.as_deref().unwrap_or("")) }
            td { (line.delegation) }
            td { (line.waiting_for) (until(line.until, now)) }
            td { (line.waiting_party) }
            td { (time(line.since)) }
            td {
                @for (kind, severity) in &line.alerts {
                    span class={ "alert-" (severity.as_str()) } { (kind.as_str()) } " "
                }
            }
        }
    }
}

/// What the zone page shows.
pub struct ZonePage<'a> {
    pub row: &'a ZoneRow,
    pub waiting: Waiting,
    pub alerts: &'a [AlertRow],
    pub events: &'a [EventRow],
    /// The timeline picture (an SVG element, rendered by `timeline`).
    pub timeline: String,
    /// A line after a switch was recorded.
    pub notice: Option<String>,
    pub now: Timestamp,
    /// The configured provider accounts (a signed move goes to one of them).
    pub accounts: &'a [String],
}

/// Whether a signed move may be declared from the console: an `active` zone, DNSSEC
/// wanted, no move under way, and another account to go to (`intent::declare_move`
/// checks the rest with the providers).
pub fn move_offered(row: &ZoneRow, accounts: &[String]) -> bool {
    row.zone.state == Some(State::Active)
        && row.zone.intent == Intent::Enabled
        && row.zone.facts.signed_move.is_none()
        && accounts.len() > 1
}

/// One zone: the DS to enter, the last look, the alerts, the timeline, the history.
pub fn zone(viewer: &Viewer, z: &ZonePage) -> String {
    let row = z.row;
    let facts = &row.zone.facts;
    let name = row.zone.name.as_str();
    let observation = row.last_observation.as_ref();
    page(
        name,
        Some(viewer),
        html! {
            @if let Some(n) = &z.notice { p.notice role="status" { (n) } }
            h1 { (name) " " (state_badge(row.zone.state)) }
            table.facts {
                tr { th { "Intent" } td { (row.zone.intent.as_str()) } }
                tr { th { "In this state since" } td { (time(row.zone.since)) } }
                tr { th { "Waiting for" } td { (z.waiting.what) (until(z.waiting.until, z.now)) } }
                tr { th { "Waiting on" } td #waiting-on { (z.waiting.party()) } }
                tr { th { "Provider" } td { (row.account().unwrap_or("(one provider)")) @if let Some(e) = row.provider_error() { " " span.error { "failing: " (e) } } } }
                tr { th { "Delegation" } td { (facts.delegation.verdict.map_or("unknown", |d| d.as_str())) @if let Some(ns) = &facts.delegation.provider_ns { span.muted { " (the provider's name servers: " (ns.join(", ")) ")" } } } }
                tr { th { "Evidence" } td { (evidence_text(row)) } }
                @if let Some(path) = &facts.parent_way.ds_path { tr { th { "The parent's way" } td { (path.describe()) } } }
                @if let Some(mv) = &facts.signed_move { tr { th { "Signed move" } td #signed-move { "from provider " (mv.source) " to provider " (mv.target) ", phase " code { (mv.phase.name()) } } } }
                tr { th { "Last full look" } td { @if let Some(t) = row.last_observed_at { (time(t)) } @else { "none yet" } } }
                tr { th { "Next check" } td { (time(row.next_check_at)) } }
            }
            @if let Some(ds) = &facts.lifecycle.ds_to_enter {
                section.box.enter #enter {
                    h2 { "Enter at the registrar" }
                    p { "The DS record for the parent zone (or the DNSKEY, for registrars that ask for the key):" }
                    div.copy-row { code #ds-line { (ds) } button type="button" data-copy="ds-line" { "Copy DS" } }
                    @if let Some(key) = &facts.lifecycle.dnskey_to_enter {
                        div.copy-row { code #dnskey-line { (key) } button type="button" data-copy="dnskey-line" { "Copy DNSKEY" } }
                    }
                }
            }
            // A roll in progress: status's line, and its wait (the zone's) with it.
            @if let Some(roll) = &facts.key_roll {
                section.box #key-roll {
                    h2 { "Key rollover" }
                    p #key-roll-line { (roll_line(roll)) }
                    p #key-roll-wait { "Waiting for " (z.waiting.what) ", on " (z.waiting.party()) (until(z.waiting.until, z.now)) "." }
                    p.muted { code { "dnssec-warden roll " (name) " --abort" } " goes back where the phase allows it (docs/operations.md, \"Key rollovers\")." }
                }
            }
            @if viewer.operator {
                section.actions #switch {
                    // A disable is refused during a signed move (`intent::record`).
                    @if let Some(mv) = &facts.signed_move {
                        p.muted #no-disable { "DNSSEC cannot be disabled during the signed move (a safe abort is not built): once it has finished, disable it at provider " (mv.target) "." }
                    }
                    @for s in [Switch::Enable, Switch::Disable, Switch::DisableNeverSubmitted] {
                        @if s.applies(row.zone.state, row.zone.intent) && facts.signed_move.is_none() {
                            a class={ "button" @if s != Switch::Enable { " danger" } } href={ (zone_link(name)) "/switch?to=" (s.as_str()) } { (s.title()) "…" }
                        }
                    }
                    @if move_offered(row, z.accounts) {
                        a.button #move href={ (zone_link(name)) "/move" } { "Move to another provider (signed)…" }
                    }
                }
            }
            h2 { "Open alerts" }
            @if z.alerts.is_empty() { p.muted { "None." } }
            @else {
                ul #alerts { @for a in z.alerts { li class={ "alert-" (a.severity.as_str()) } { strong { (a.kind.as_str()) } " since " (time(a.opened_at)) ": " (a.message) } } }
            }
            h2 { "Timeline" }
            div.timeline { (PreEscaped(&z.timeline)) }
            h2 { "The last look" }
            (parent_table(observation))
            (child_table(observation))
            (move_table(observation))
            h2 { "History" }
            table #history {
                thead { tr { th { "At" } th { "What" } } }
                tbody {
                    @for e in z.events.iter().rev() {
                        tr { td { (time(e.at)) } td { (e.story()) } }
                    }
                }
            }
        },
    )
}

fn evidence_text(row: &ZoneRow) -> String {
    match row.evidence() {
        (Some("validated"), _) => "validated from the trust anchor".to_string(),
        (Some("insecure"), why) => format!(
            "unvalidated: the parent zone is unsigned ({})",
            why.unwrap_or("provably insecure")
        ),
        (Some("unchecked"), _) => "a routine look (not validated)".to_string(),
        (Some(other), _) => other.to_string(),
        (None, _) => "no parent answer at the last look".to_string(),
    }
}

/// What every parent address answered for the DS (and delegated to) at the last look.
fn parent_table(observation: Option<&Value>) -> Markup {
    let parent = observation.and_then(|o| o.get("parent"));
    let view = parent.and_then(|p| serde_json::from_value::<ParentView>(p.clone()).ok());
    html! {
        @match (view, parent.and_then(|p| p.get("error")).and_then(Value::as_str)) {
            (Some(view), _) => {
                h3 { "Parent servers (" (view.parent) ")" }
                table #parent {
                    thead { tr { th { "Server" } th { "Address" } th { "DS" } th { "Delegates to" } } }
                    tbody {
                        @for a in &view.answers {
                            tr {
                                td { (a.server) }
                                td.mono { (a.addr) }
                                td { (ds_text(&a.answer)) }
                                td { (view.delegations.iter().find(|d| d.addr == a.addr).map(|d| ns_text(&d.answer)).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
            (None, Some(error)) => { p.error { "The parent could not be asked: " (error) } }
            (None, None) => { p.muted { "No look at the parent yet." } }
        }
    }
}

fn ns_text(answer: &NsAnswer) -> String {
    match answer {
        NsAnswer::Servers { hosts, ttl } => format!("{} (TTL {ttl})", hosts.join(", ")),
        NsAnswer::NotDelegated => "not delegated".to_string(),
        NsAnswer::Unknown(why) => format!("unknown: {why}"),
    }
}

fn ds_text(answer: &DsAnswer) -> String {
    match answer {
        DsAnswer::Present { ds, ttl } => format!(
            "{} (TTL {ttl})",
            ds.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ),
        DsAnswer::Absent => "no DS".to_string(),
        DsAnswer::Unknown(why) => format!("unknown: {why}"),
    }
}

/// What every child address served as DNSKEY at the last look.
fn child_table(observation: Option<&Value>) -> Markup {
    let child = observation.and_then(|o| o.get("child"));
    html! {
        @match (child.and_then(Value::as_array), child.and_then(|c| c.get("error")).and_then(Value::as_str)) {
            (Some(answers), _) => {
                h3 { "The zone's name servers" }
                table #child {
                    thead { tr { th { "Server" } th { "Address" } th { "DNSKEY" } } }
                    tbody {
                        @for a in answers {
                            tr {
                                td { (a.get("server").and_then(Value::as_str).unwrap_or("")) }
                                td.mono { (a.get("addr").and_then(Value::as_str).unwrap_or("")) }
                                td { (dnskey_text(a.get("answer"))) }
                            }
                        }
                    }
                }
            }
            (None, Some(error)) => { p.error { "The name servers could not be asked: " (error) } }
            (None, None) => {}
        }
    }
}

/// A signed move's last look: every address of both accounts and of the parent, as
/// `engine::moving` summarised it.
fn move_table(observation: Option<&Value>) -> Markup {
    let Some(mv) = observation.and_then(|o| o.get("signed_move")) else {
        return html! {};
    };
    let rows = |side: &str| {
        mv.get(side)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let said = |a: &Value| -> String {
        match a.get("answer") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Object(o)) => o
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            _ => String::new(),
        }
    };
    html! {
        h3 { "The signed move's look" }
        table #move-look {
            thead { tr { th { "Where" } th { "Address" } th { "Answered" } } }
            tbody {
                @for side in ["source", "target", "parent"] {
                    @for a in rows(side) {
                        tr {
                            td { (side) }
                            td.mono { (a.get("addr").and_then(Value::as_str).unwrap_or("")) }
                            td { (said(&a)) }
                        }
                    }
                }
            }
        }
    }
}

fn dnskey_text(answer: Option<&Value>) -> String {
    match answer {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(o)) => {
            let keys = o
                .get("keys")
                .and_then(Value::as_array)
                .map(|k| {
                    k.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_default();
            let signed = o.get("signed").and_then(Value::as_bool).unwrap_or(false);
            let ttl = o.get("ttl").and_then(Value::as_u64).unwrap_or(0);
            format!(
                "{keys} (TTL {ttl}{})",
                if signed { ", signed" } else { ", unsigned" }
            )
        }
        _ => String::new(),
    }
}

/// The confirmation before a signed move: what happens, the account to move to, then the
/// form that declares it.
pub fn move_confirm(
    viewer: &Viewer,
    zone: &str,
    state: Option<State>,
    accounts: &[String],
) -> String {
    page(
        "Move to another provider",
        Some(viewer),
        html! {
            h1 { "Move to another provider: " (zone) }
            p { "The zone is in " (state_badge(state)) "." }
            section.box.warn #consequence {
                p { "A signed move (RFC 8901): the zone stays validated throughout. Create the zone at the new provider first (its records, unsigned). The daemon then signs it there, has each provider publish the other's key, and asks the registrar to add the new provider's DS beside the old one, then to change the NS, then to remove the old DS, each only once every parent and child server confirms the step before and the caches have forgotten what it takes away. Both providers must be able to publish another signer's DNSKEY (PowerDNS with direct-dnskey=yes); where either cannot, the move is refused and the zone must go insecure first." }
            }
            p { "This declares the move, as " code { "dnssec-warden move " (zone) " --to ACCOUNT" } " does; the daemon acts on it, and the history names you." }
            form method="post" action={ (zone_link(zone)) "/move" } {
                input type="hidden" name="csrf" value=(viewer.csrf);
                label for="to" { "Move to the account " }
                select #to name="to" {
                    @for a in accounts { option value=(a) { (a) } }
                }
                div.actions {
                    button class={ "primary" } type="submit" name="confirm" value="yes" { "Yes, move it" }
                    a.button href=(zone_link(zone)) { "Cancel" }
                }
            }
        },
    )
}

/// The confirmation before a switch: the consequence, then the form that records it.
pub fn confirm(viewer: &Viewer, zone: &str, state: Option<State>, switch: Switch) -> String {
    page(
        switch.title(),
        Some(viewer),
        html! {
            h1 { (switch.title()) ": " (zone) }
            p { "The zone is in " (state_badge(state)) "." }
            section.box.warn #consequence { p { (switch.consequence()) } }
            p { "This records your intent, as " code { "dnssec-warden " (switch.command()) " " (zone) } " does; the daemon acts on it, in the safe order, and the history names you." }
            form method="post" action={ (zone_link(zone)) "/switch" } {
                input type="hidden" name="csrf" value=(viewer.csrf);
                input type="hidden" name="to" value=(switch.as_str());
                div.actions {
                    button class={ "primary" } type="submit" name="confirm" value="yes" { "Yes, " (switch.title().to_lowercase()) }
                    a.button href=(zone_link(zone)) { "Cancel" }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::facts::LifecycleFacts;
    use crate::lifecycle::{Facts, Zone};
    use crate::zone_name::ZoneName;

    fn row(state: State, facts: Facts) -> ZoneRow {
        ZoneRow {
            zone: Zone {
                name: ZoneName::parse("shop.test").unwrap(),
                intent: Intent::Enabled,
                ds_never_submitted: false,
                state: Some(state),
                since: Timestamp(1_800_000_000_000),
                facts,
            },
            next_check_at: Timestamp(1_800_000_060_000),
            last_observed_at: None,
            sampled_at: None,
            last_observation: None,
            version: 1,
            lease: None,
        }
    }

    fn render(row: &ZoneRow, operator: bool) -> String {
        render_with(row, operator, &[])
    }

    fn render_with(row: &ZoneRow, operator: bool, accounts: &[String]) -> String {
        let viewer = Viewer {
            user: "alice",
            role: if operator { "operator" } else { "viewer" },
            operator,
            csrf: "token",
        };
        zone(
            &viewer,
            &ZonePage {
                row,
                waiting: Waiting {
                    what: "the DS at every parent server".into(),
                    on: "registrar",
                    accounts: Vec::new(),
                    until: None,
                },
                alerts: &[],
                events: &[],
                timeline: String::new(),
                notice: None,
                now: Timestamp(1_800_000_000_000),
                accounts,
            },
        )
    }

    const DS: &str = "shop.test. 3600 IN DS 12345 13 2 ABCD";

    /// Safety rule 8 on the page: the DS and its copy buttons exactly when `status` shows
    /// a DS to enter, never from the followed key alone.
    #[test]
    fn the_ds_to_enter_is_shown_exactly_when_the_instruction_stands() {
        let shown = row(
            State::AwaitingDs,
            Facts {
                lifecycle: LifecycleFacts {
                    ds_line: Some(DS.into()),
                    ds_to_enter: Some(DS.into()),
                    dnskey_to_enter: Some("shop.test. IN DNSKEY 257 3 13 AAAA".into()),
                    ..LifecycleFacts::default()
                },
                ..Facts::default()
            },
        );
        let page = render(&shown, false);
        assert!(page.contains("id=\"ds-line\""), "{page}");
        assert!(page.contains(DS));
        assert!(
            page.contains("data-copy=\"ds-line\"") && page.contains("data-copy=\"dnskey-line\"")
        );
        let withheld = row(
            State::AwaitingDs,
            Facts {
                lifecycle: LifecycleFacts {
                    ds_line: Some(DS.into()),
                    ..LifecycleFacts::default()
                },
                ..Facts::default()
            },
        );
        let page = render(&withheld, true);
        assert!(
            !page.contains("id=\"enter\"") && !page.contains(DS),
            "{page}"
        );
    }

    #[test]
    fn the_switch_is_offered_to_an_operator_where_it_applies() {
        let awaiting = row(State::AwaitingDs, Facts::default());
        let page = render(&awaiting, true);
        // Enabled already: disable, and the never-submitted form of it in awaiting_ds.
        assert!(!page.contains("switch?to=enable\""), "{page}");
        assert!(page.contains("switch?to=disable\""));
        assert!(page.contains("switch?to=disable-never-submitted\""));
        let active = row(State::Active, Facts::default());
        assert!(!render(&active, true).contains("disable-never-submitted"));
        assert!(!render(&awaiting, false).contains("/switch?to="));
    }

    /// A zone in a signed move: its accounts and phase, and the move's last look, every
    /// address of both accounts and of the parent.
    #[test]
    fn a_signed_move_shows_its_phase_and_its_look() {
        let key = crate::dnssec::Dnskey::parse_text(
            "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
        )
        .unwrap();
        let mut moving = row(
            State::Active,
            Facts {
                signed_move: Some(
                    crate::lifecycle::signed_move::Move::new("shop.test.", key)
                        .between("pdns-a", "pdns-b"),
                ),
                ..Facts::default()
            },
        );
        moving.last_observation = Some(serde_json::json!({
            "at": "2027-01-01T00:00:00Z",
            "signed_move": {
                "phase": "signing_at_target",
                "source": [{"addr": "127.0.0.8", "answer": {"keys": [1], "signed_by": [1], "ttl": 2}}],
                "target": [{"addr": "127.0.0.10", "answer": "unknown: timed out"}],
                "parent": [{"addr": "127.0.0.2", "answer": {"delegation": "source", "ds": [1], "validated": true}}],
            },
        }));
        let page = render(&moving, false);
        assert!(
            page.contains(
                "from provider pdns-a to provider pdns-b, phase <code>signing_at_target</code>"
            ),
            "{page}"
        );
        for addr in ["127.0.0.8", "127.0.0.10", "127.0.0.2", "unknown: timed out"] {
            assert!(page.contains(addr), "{addr}: {page}");
        }
        let settled = render(&row(State::Active, Facts::default()), false);
        assert!(!settled.contains("signed-move") && !settled.contains("move-look"));
    }

    /// The move's button: for an operator, on an active zone with DNSSEC wanted, no move
    /// under way and another account configured.
    #[test]
    fn the_move_is_offered_to_an_operator_where_it_can_start() {
        let two = ["pdns-a".to_string(), "pdns-b".to_string()];
        let active = row(State::Active, Facts::default());
        assert!(render_with(&active, true, &two).contains("id=\"move\""));
        assert!(!render_with(&active, false, &two).contains("id=\"move\""));
        assert!(!render_with(&active, true, &two[..1]).contains("id=\"move\""));
        let waiting = row(State::AwaitingDs, Facts::default());
        assert!(!render_with(&waiting, true, &two).contains("id=\"move\""));
    }
}
