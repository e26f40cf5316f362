//! The engine's decisions about one zone as canonical text, step by step, read from what
//! the store holds after each operation of a world: the state before and after, the facts
//! as stored (each changed fact, and a hash of the whole stored JSON), the next check, the
//! kind of look, the effects queued, the history's events (kind and text, repeats
//! counted) and the alerts opened, changed and resolved. Two builds that decide alike
//! write the same text for the same world; `first_difference` names the first step where
//! they do not.
//!
//! Only the store's rows and the world's clock go in: no wall clock, no row ids, nothing a
//! refactoring may rename (the facts' Rust paths): what is recorded is what the product
//! wrote.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use base64::Engine as _;
use dnssec_warden::dnssec::{DigestType, Dnskey, Ds};
use dnssec_warden::lifecycle::Timestamp;
use dnssec_warden::store::Store;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// FNV-1a, 64 bits: a hash that is the same in every build and on every host.
pub fn fnv64(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A time as an offset from the world's start, in seconds (milliseconds where not whole).
fn offset(t0: Timestamp, at: Timestamp) -> String {
    let ms = at.0 - t0.0;
    if ms % 1000 == 0 {
        format!("+{}s", ms / 1000)
    } else {
        format!("+{ms}ms")
    }
}

#[derive(Default)]
struct Seen {
    state: Option<String>,
    facts: String,
    next_check: Option<Timestamp>,
    last_observed: Option<Timestamp>,
    sampled: Option<Timestamp>,
    /// Event id -> its repeats.
    events: HashMap<i64, i64>,
    /// Alert id -> (message, resolved).
    alerts: HashMap<i64, (String, bool)>,
    outbox: HashSet<i64>,
}

/// The worlds' keys are drawn at random: their tags, DS digests and DNSKEYs are written
/// as labels in the order the record first names them (K1, H1, B1...), so that the same
/// decisions read the same whatever keys were drawn.
/// Keys the world made are numbered in the order the driver showed them (`know_keys`),
/// whatever their tags: a list the product sorts by tag then reads the same.
#[derive(Default)]
struct Keys {
    next: usize,
    tags: HashMap<String, usize>,
    digests: HashMap<String, usize>,
    blobs: HashMap<String, usize>,
}

fn label(next: &mut usize, map: &mut HashMap<String, usize>, token: &str, prefix: &str) -> String {
    let n = *map.entry(token.to_string()).or_insert_with(|| {
        *next += 1;
        *next
    });
    format!("{prefix}{n}")
}

impl Keys {
    /// A key's tag, DS digest (SHA-256) and DNSKEY, under one number.
    fn know_key(&mut self, owner: &str, key: &Dnskey) {
        let tag = key.key_tag().to_string();
        let n = *self.tags.entry(tag).or_insert_with(|| {
            self.next += 1;
            self.next
        });
        self.blobs
            .entry(base64::engine::general_purpose::STANDARD.encode(&key.public_key))
            .or_insert(n);
        if let Ok(ds) = key.to_ds(owner, DigestType::Sha256) {
            self.digests.entry(hex(&ds.digest)).or_insert(n);
        }
    }

    /// A DS record's tag and digest, under one number.
    fn know_ds(&mut self, ds: &Ds) {
        let n = *self.tags.entry(ds.key_tag.to_string()).or_insert_with(|| {
            self.next += 1;
            self.next
        });
        self.digests.entry(hex(&ds.digest)).or_insert(n);
    }

    fn canon(&mut self, text: &str) -> String {
        let word = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
        let mut out = String::with_capacity(text.len());
        let mut last_tag_end: Option<usize> = None;
        let mut rest = text;
        let mut at = 0;
        while !rest.is_empty() {
            let len = if rest.starts_with(word) {
                rest.find(|c| !word(c)).unwrap_or(rest.len())
            } else {
                rest.find(word).unwrap_or(rest.len())
            };
            let token = &rest[..len];
            let (before, after) = (&text[..at], &text[at + len..]);
            if !token.starts_with(word) {
                out.push_str(token);
            } else if token.len() == 64
                && token
                    .chars()
                    .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c))
            {
                out.push_str(&label(&mut self.next, &mut self.digests, token, "H"));
            } else if token.len() >= 60 {
                out.push_str(&label(&mut self.next, &mut self.blobs, token, "B"));
            } else if let Some((tag, more)) = token
                .strip_prefix("257/13/")
                .map(|tail| tail.split_once('/').unwrap_or((tail, "")))
                .filter(|(tag, _)| !tag.is_empty() && tag.chars().all(|c| c.is_ascii_digit()))
            {
                // A served key: flags/algorithm/tag[/what].
                out.push_str("257/13/");
                out.push_str(&label(&mut self.next, &mut self.tags, tag, "K"));
                if !more.is_empty() {
                    out.push('/');
                    out.push_str(more);
                }
            } else if token.len() <= 5
                && token.chars().all(|c| c.is_ascii_digit())
                && !after.starts_with(" 3 13 ")
                && (after.starts_with(" 13 2 ")
                    || [
                        "DS ",
                        "DS(",
                        "key ",
                        "keys ",
                        "DNSKEY ",
                        "key tag ",
                        "key_tag: ",
                    ]
                    .iter()
                    .any(|p| before.ends_with(p))
                    || (before.ends_with(" and ") && last_tag_end == Some(at - 5)))
            {
                out.push_str(&label(&mut self.next, &mut self.tags, token, "K"));
                last_tag_end = Some(at + len);
            } else {
                out.push_str(token);
            }
            at += len;
            rest = &rest[len..];
        }
        sort_served_keys(&out)
    }
}

/// A list of served keys (`257/13/K1,257/13/K2/unsigned`) is in the order of the keys'
/// random tags: its items sorted by label, so that it reads the same whatever tags were
/// drawn.
fn sort_served_keys(text: &str) -> String {
    const ITEM: &str = "257/13/K";
    let item_len = |t: &str| {
        t.find(|c: char| !(c.is_ascii_alphanumeric() || c == '/'))
            .unwrap_or(t.len())
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(ITEM) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let mut items = Vec::new();
        loop {
            let len = item_len(rest);
            items.push(&rest[..len]);
            rest = &rest[len..];
            match rest.strip_prefix(',') {
                Some(next) if next.starts_with(ITEM) => rest = next,
                _ => break,
            }
        }
        items.sort();
        out.push_str(&items.join(","));
    }
    out.push_str(rest);
    out
}

/// Records one zone's steps in one world.
pub struct Recorder {
    keys: Keys,
    zone: String,
    t0: Timestamp,
    out: String,
    seen: Seen,
    /// Steps written (snapshots in which something changed).
    pub steps: usize,
    /// Every state and signed-move phase the zone was in at a snapshot.
    pub states: BTreeSet<String>,
    pub phases: BTreeSet<String>,
}

impl Recorder {
    /// A world's record; `header` names the world (its seed and parameters) and is its
    /// first line.
    pub fn new(zone: &str, t0: Timestamp, header: &str) -> Self {
        Self {
            keys: Keys::default(),
            zone: zone.to_string(),
            t0,
            out: format!("world {header}\n"),
            seen: Seen::default(),
            steps: 0,
            states: BTreeSet::new(),
            phases: BTreeSet::new(),
        }
    }

    /// The world's keys and DS records as they are now: each new one gets the next
    /// number, so that labels follow the world's story and not the keys' random tags.
    pub fn know_keys(&mut self, keys: &[Dnskey], ds: &[Ds]) {
        for key in keys {
            self.keys.know_key(&self.zone, key);
        }
        for d in ds {
            self.keys.know_ds(d);
        }
    }

    /// A line of the world's description (its operations), before its steps.
    pub fn describe(&mut self, line: &str) {
        let _ = writeln!(self.out, "  {line}");
    }

    /// What changed in the store since the last snapshot, as one step named `label` at
    /// `now` (the world's clock); nothing is written if nothing changed.
    pub async fn snapshot(&mut self, store: &Store, label: &str, now: Timestamp) {
        let Some(row) = store.zone(&self.zone).await.expect("the zone's row") else {
            return;
        };
        let mut lines: Vec<String> = Vec::new();
        let state = row.zone.state.map(|s| s.as_str().to_string());
        if let Some(s) = &state {
            self.states.insert(s.clone());
        }
        if let Some(m) = &row.zone.facts.signed_move {
            self.phases.insert(format!("{:?}", m.phase));
        }
        if state != self.seen.state {
            lines.push(format!(
                "state {} -> {}",
                self.seen.state.as_deref().unwrap_or("(none)"),
                state.as_deref().unwrap_or("(none)")
            ));
        }
        let facts = serde_json::to_string(&row.zone.facts).expect("facts serialise");
        let facts = self.keys.canon(&facts);
        if facts != self.seen.facts {
            lines.push(format!("facts #{:016x}", fnv64(&facts)));
            lines.extend(facts_diff(&self.seen.facts, &facts));
        }
        // The step's header: the look (full or sampled) and the next check, if changed.
        let mut head = String::new();
        if row.last_observed_at != self.seen.last_observed {
            head.push_str(" full look");
        } else if row.sampled_at != self.seen.sampled {
            head.push_str(" sampled look");
        }
        if Some(row.next_check_at) != self.seen.next_check {
            let _ = write!(head, " next {}", offset(self.t0, row.next_check_at));
        }
        let outbox = store
            .pending_effects(&self.zone)
            .await
            .expect("pending effects");
        let mut pending = HashSet::new();
        for item in outbox {
            if !self.seen.outbox.contains(&item.id) {
                lines.push(format!("effect queued {:?}", item.effect));
            }
            pending.insert(item.id);
        }
        let events = store.events(&self.zone).await.expect("events");
        let mut repeats = HashMap::new();
        for e in &events {
            match self.seen.events.get(&e.id) {
                None => lines.push(format!(
                    "event {} {}{}{}",
                    e.kind,
                    match (&e.from, &e.to) {
                        // The state the event was written in: the step says it.
                        (from, to) if from == to => String::new(),
                        (from, to) => format!(
                            "[{} -> {}] ",
                            from.as_deref().unwrap_or("-"),
                            to.as_deref().unwrap_or("-")
                        ),
                    },
                    e.reason,
                    if e.repeats > 0 {
                        format!(" (x{})", 1 + e.repeats)
                    } else {
                        String::new()
                    }
                )),
                Some(r) if *r != e.repeats => lines.push(format!(
                    "event {} again (x{}): {}",
                    e.kind,
                    1 + e.repeats,
                    e.reason
                )),
                Some(_) => {}
            }
            repeats.insert(e.id, e.repeats);
        }
        let alerts = store.alerts(&self.zone).await.expect("alerts");
        let mut known = HashMap::new();
        for a in &alerts {
            let resolved = a.resolved_at.is_some();
            match self.seen.alerts.get(&a.id) {
                None => {
                    lines.push(format!(
                        "alert opened {} {:?}: {}",
                        a.kind.as_str(),
                        a.severity,
                        a.message
                    ));
                    if resolved {
                        lines.push(format!("alert resolved {}", a.kind.as_str()));
                    }
                }
                Some((message, was)) => {
                    if *message != a.message {
                        lines.push(format!("alert changed {}: {}", a.kind.as_str(), a.message));
                    }
                    if resolved && !was {
                        lines.push(format!("alert resolved {}", a.kind.as_str()));
                    }
                }
            }
            known.insert(a.id, (a.message.clone(), resolved));
        }
        self.seen = Seen {
            state,
            facts,
            next_check: Some(row.next_check_at),
            last_observed: row.last_observed_at,
            sampled: row.sampled_at,
            events: repeats,
            alerts: known,
            outbox: pending,
        };
        if lines.is_empty() && head.is_empty() {
            return;
        }
        let lines: Vec<String> = lines.iter().map(|l| self.keys.canon(l)).collect();
        self.steps += 1;
        let _ = writeln!(
            self.out,
            "  step {} at {}{head}: {label}",
            self.steps,
            offset(self.t0, now)
        );
        for line in lines {
            let _ = writeln!(self.out, "    {line}");
        }
    }

    /// The world's text.
    pub fn finish(self) -> String {
        self.out
    }
}

/// The facts that changed between two stored forms (flat JSON objects; an object within
/// by its dotted names), one line each.
fn facts_diff(before: &str, after: &str) -> Vec<String> {
    fn flatten(prefix: &str, value: serde_json::Value, into: &mut BTreeMap<String, String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&key, v, into);
                }
            }
            other => {
                into.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let parse = |text: &str| {
        let mut flat = BTreeMap::new();
        if let Ok(value) = serde_json::from_str(text) {
            flatten("", value, &mut flat);
        }
        flat
    };
    let (old, new) = (parse(before), parse(after));
    let mut lines = Vec::new();
    for (key, value) in &new {
        if old.get(key) != Some(value) {
            lines.push(format!("  {key} = {value}"));
        }
    }
    for key in old.keys() {
        if !new.contains_key(key) {
            lines.push(format!("  {key} removed"));
        }
    }
    lines
}

/// Where `now` first differs from `golden` (lines starting with `#` are comments): the
/// world, the step, what was recorded and what is decided now, with the step's text on
/// both sides. `None` when they are the same.
pub fn first_difference(golden: &str, now: &str) -> Option<String> {
    let lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    let (old, new) = (lines(golden), lines(now));
    let at = (0..old.len().max(new.len())).find(|&i| old.get(i) != new.get(i))?;
    // The world and the step the line belongs to, and that step's lines on each side.
    let head = |v: &[String], prefix: &str| -> String {
        v[..at.min(v.len())]
            .iter()
            .rev()
            .find(|l| l.starts_with(prefix))
            .cloned()
            .unwrap_or_else(|| "(none)".to_string())
    };
    let world = head(&old, "world ");
    let step = head(&old, "  step ");
    let header = |l: &String| l.starts_with("  step ") || l.starts_with("world ");
    let block = |v: &[String]| -> String {
        let end = at.min(v.len());
        let start = v[..end].iter().rposition(header).unwrap_or(0);
        let mut taken = vec![v.get(start).map(String::as_str).unwrap_or("")];
        for (i, l) in v.iter().enumerate().skip(start + 1).take(40) {
            if i > at && header(l) {
                break;
            }
            taken.push(l);
        }
        taken.join("\n")
    };
    Some(format!(
        "the first decision that moved: {world}\n  at {step}\n  recorded: {:?}\n  now:      {:?}\n--- recorded step ---\n{}\n--- now ---\n{}",
        old.get(at)
            .map(String::as_str)
            .unwrap_or("(end of the record)"),
        new.get(at)
            .map(String::as_str)
            .unwrap_or("(end of the record)"),
        block(&old),
        block(&new),
    ))
}
