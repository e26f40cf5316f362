use super::layout::{Scale, ticks};
use super::*;
use crate::dns::{DsAnswer, Evidence, ParentView, ServerAnswer, UnknownReason};
use crate::dnssec::DsLine;
use crate::lifecycle::facts::{LifecycleFacts, WaitFacts};
use crate::lifecycle::hold::{Hold, Party};
use crate::lifecycle::model::Zone;
use crate::lifecycle::rules::disable_deadline;
use crate::lifecycle::{Facts, Intent, State};
use crate::store::EventKind;
use crate::zone_name::ZoneName;

/// 2026-06-25T09:14:02Z.
const T0: i64 = 1_782_378_842_000;
const DS: &str = "example.com. 3600 IN DS 26191 13 2 135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07";

fn row(state: Option<State>, since: i64, facts: Facts) -> ZoneRow {
    ZoneRow {
        zone: Zone {
            name: ZoneName::from_canonical("example.com.".to_string()).unwrap(),
            intent: Intent::Enabled,
            ds_never_submitted: false,
            state,
            since: Timestamp(since),
            facts,
        },
        next_check_at: Timestamp(since),
        last_observed_at: None,
        sampled_at: None,
        last_observation: None,
        version: 1,
        lease: None,
    }
}

fn event(at: i64, kind: EventKind, from: Option<&str>, to: Option<&str>, reason: &str) -> EventRow {
    EventRow {
        id: 0,
        zone: "example.com.".to_string(),
        at: Timestamp(at),
        kind,
        from: from.map(str::to_string),
        to: to.map(str::to_string),
        reason: reason.to_string(),
        repeats: 0,
        last_seen: None,
        holder: None,
        epoch: None,
    }
}

fn go(at: i64, from: Option<&str>, to: &str) -> EventRow {
    event(at, EventKind::Transition, from, Some(to), "because")
}

fn draw(zone: &ZoneRow, events: &[EventRow], now: i64) -> String {
    let policy = Policy::default();
    render(&TimelineInput {
        zone,
        events,
        policy: &policy,
        now: Timestamp(now),
    })
}

/// The picture parsed as XML, its root checked: an accessible, self-contained SVG
/// whose every coordinate is a finite number inside it.
fn parse(svg: &str) -> roxmltree::Document<'_> {
    let doc = roxmltree::Document::parse(svg)
        .unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{svg}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    assert_eq!(root.attribute("role"), Some("img"));
    assert!(root.attribute("aria-label").is_some_and(|l| !l.is_empty()));
    assert_eq!(root.attribute("width"), Some("960"));
    let height: f64 = root.attribute("height").unwrap().parse().unwrap();
    assert!(
        root.first_element_child()
            .is_some_and(|t| t.has_tag_name("title") && !t.text().unwrap_or("").is_empty())
    );
    assert!(!svg.contains("<script"), "no script, ever");
    for node in doc.descendants().filter(|n| n.is_element()) {
        for attr in ["x", "y", "x1", "x2", "y1", "y2", "width", "height"] {
            if let Some(v) = node.attribute(attr) {
                let v: f64 = v.parse().unwrap_or_else(|_| panic!("{attr}={v:?}"));
                assert!(v.is_finite() && v >= -10.0, "{attr}={v} in {node:?}");
                let limit = if attr.starts_with('y') || attr == "height" {
                    height
                } else {
                    f64::from(WIDTH)
                };
                assert!(v <= limit + 1.0, "{attr}={v} beyond {limit} in {node:?}");
            }
        }
    }
    doc
}

fn with_class<'a, 'i>(
    doc: &'a roxmltree::Document<'i>,
    class: &str,
) -> Vec<roxmltree::Node<'a, 'i>> {
    doc.descendants()
        .filter(|n| {
            n.attribute("class")
                .is_some_and(|c| c.split_whitespace().any(|c| c == class))
        })
        .collect()
}

fn num(node: &roxmltree::Node<'_, '_>, attr: &str) -> f64 {
    node.attribute(attr).unwrap().parse().unwrap()
}

fn title(node: &roxmltree::Node<'_, '_>) -> String {
    node.children()
        .find(|c| c.has_tag_name("title"))
        .and_then(|t| t.text())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn state_widths_are_in_proportion_to_durations() {
    let events = [
        go(T0, None, "disabled"),
        go(T0 + HOUR, Some("disabled"), "enabling"),
        go(T0 + 3 * HOUR, Some("enabling"), "awaiting_ds"),
    ];
    let zone = row(Some(State::AwaitingDs), T0 + 3 * HOUR, Facts::default());
    let svg = draw(&zone, &events, T0 + 6 * HOUR);
    let doc = parse(&svg);
    let segments = with_class(&doc, "tl-state");
    let names: Vec<_> = segments
        .iter()
        .map(|s| s.attribute("class").unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "tl-state tl-state-disabled",
            "tl-state tl-state-enabling",
            "tl-state tl-state-awaiting_ds"
        ]
    );
    let widths: Vec<f64> = segments.iter().map(|s| num(s, "width")).collect();
    let total = PLOT_X1 - PLOT_X0;
    for (w, hours) in widths.iter().zip([1.0, 2.0, 3.0]) {
        assert!((w / total - hours / 6.0).abs() < 0.001, "{widths:?}");
    }
    // Side by side, from the first event to now.
    assert!((num(&segments[0], "x") - PLOT_X0).abs() < 0.01);
    for pair in segments.windows(2) {
        let end = num(&pair[0], "x") + num(&pair[0], "width");
        assert!((end - num(&pair[1], "x")).abs() < 0.02);
    }
    assert!(
        title(&segments[1]).contains("(2h)"),
        "{}",
        title(&segments[1])
    );
    assert!(title(&segments[2]).contains("now"));
    // The name is written where it fits.
    assert!(
        with_class(&doc, "tl-state-label")
            .iter()
            .any(|t| t.text() == Some("awaiting_ds"))
    );
}

/// A zone in `ttl_wait` since an hour before `T0`, its wait restarted at `T0` by a gap
/// in looks (rule 2): `T_gone` at `T0`, both TTLs an hour, the default margin an hour.
fn in_ttl_wait() -> (ZoneRow, Vec<EventRow>, Timestamp) {
    let facts = Facts {
        lifecycle: LifecycleFacts {
            t_gone: Some(Timestamp(T0)),
            gone_confirmed_at: Some(Timestamp(T0)),
            max_ds_ttl: Some(3600),
            max_dnskey_ttl: Some(3600),
            ..LifecycleFacts::default()
        },
        ..Facts::default()
    };
    let until = disable_deadline(&facts.lifecycle, &Policy::default()).unwrap();
    assert_eq!(until, Timestamp(T0 + 3 * HOUR));
    let events = vec![
        go(T0 - 2 * DAY, None, "active"),
        go(T0 - DAY, Some("active"), "awaiting_ds_removal"),
        go(T0 - HOUR, Some("awaiting_ds_removal"), "ttl_wait"),
    ];
    (row(Some(State::TtlWait), T0 - HOUR, facts), events, until)
}

#[test]
fn overdue_is_marked_exactly_past_the_deadline() {
    let (zone, events, until) = in_ttl_wait();
    for (now, overdue) in [
        (until.0 - 1, false),
        (until.0, false),
        (until.0 + 1, true),
        (until.0 + DAY, true),
    ] {
        let svg = draw(&zone, &events, now);
        let doc = parse(&svg);
        assert_eq!(
            !with_class(&doc, "tl-overdue").is_empty(),
            overdue,
            "now {now}"
        );
        assert_eq!(!with_class(&doc, "tl-overdue-mark").is_empty(), overdue);
        // The wait itself, from T_gone to its deadline, is there either way.
        let wait = &with_class(&doc, "tl-wait")[0];
        assert!(title(wait).contains(&format!("{} → {until}", Timestamp(T0))));
    }
}

#[test]
fn the_disable_wait_is_the_lifecycles_rule() {
    let (zone, events, until) = in_ttl_wait();
    let svg = draw(&zone, &events, T0 + HOUR);
    let doc = parse(&svg);
    let bar = &with_class(&doc, "tl-ttl-disable")[0];
    assert!(title(bar).contains(&format!("{} → {until} (3h)", Timestamp(T0))));
    // Drawn to scale: the axis runs from the first event to the deadline (the future
    // part no longer than the past).
    let x = |t: i64| {
        PLOT_X0
            + (t - (T0 - 2 * DAY)) as f64 * (PLOT_X1 - PLOT_X0) / (until.0 - (T0 - 2 * DAY)) as f64
    };
    assert!((num(bar, "x") - x(T0)).abs() < 0.01);
    assert!((num(bar, "x") + num(bar, "width") - x(until.0)).abs() < 0.02);
    assert!(with_class(&doc, "tl-overdue").is_empty());
}

#[test]
fn text_from_the_rows_is_escaped() {
    let evil = "<script>alert(\"x\")</script> & 'q' \u{1}";
    let events = [
        event(T0, EventKind::Intent, None, None, evil),
        event(T0 + 1, EventKind::Transition, None, Some("active"), evil),
        event(
            T0 + 2,
            EventKind::Guard,
            Some("active"),
            Some("active"),
            evil,
        ),
        // A state name the code does not know (a newer daemon, a damaged row).
        event(
            T0 + 3,
            EventKind::Transition,
            Some("active"),
            Some("<b>\"odd\"</b>"),
            evil,
        ),
    ];
    let mut zone = row(
        Some(State::Active),
        T0,
        Facts {
            wait: WaitFacts {
                held_by: Some(Hold::new(evil, Party::Provider)),
                ..WaitFacts::default()
            },
            ..Facts::default()
        },
    );
    zone.last_observed_at = Some(Timestamp(T0));
    zone.last_observation = Some(serde_json::json!({"parent": {"parent": "com.", "answers": [
        {"server": "<ns>&\"1\"", "addr": "192.0.2.1", "answer": {"kind": "unknown", "reason": "malformed", "detail": evil}}
    ]}}));
    let svg = draw(&zone, &events, T0 + HOUR);
    let doc = parse(&svg);
    assert!(!svg.contains("<script>") && !svg.contains("<b>") && !svg.contains("<ns>"));
    assert!(!svg.contains('\u{1}'));
    // What the reader sees is the text as it was, not markup.
    let texts: Vec<String> = doc
        .descendants()
        .filter_map(|n| n.text())
        .map(str::to_string)
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("<script>alert(\"x\")</script> & 'q'"))
    );
    assert!(texts.iter().any(|t| t.contains("<ns>&\"1\"")));
    assert!(texts.iter().any(|t| t.contains("held: <script>")));
    assert!(texts.iter().any(|t| t.contains("<b>\"odd\"</b>")));
}

#[test]
fn escaping_cuts_and_replaces() {
    assert_eq!(esc("a<b>&\"c\"'", 100), "a&lt;b&gt;&amp;&quot;c&quot;&#39;");
    assert_eq!(esc("abcdef", 3), "abc…");
    assert_eq!(esc("a\u{0}b\u{FFFF}\nc", 100), "a\u{FFFD}b\u{FFFD} c");
}

#[test]
fn degenerate_histories_render() {
    let cases: Vec<(&str, ZoneRow, Vec<EventRow>, i64)> = vec![
        (
            "never observed, no events",
            row(None, T0, Facts::default()),
            vec![],
            T0,
        ),
        (
            "an intent before the first observation",
            row(None, T0, Facts::default()),
            vec![event(
                T0,
                EventKind::Intent,
                None,
                None,
                "operator asked to enable DNSSEC",
            )],
            T0 + HOUR,
        ),
        (
            "a state without events",
            row(Some(State::Active), T0, Facts::default()),
            vec![],
            T0 + DAY,
        ),
        (
            "one event",
            row(Some(State::Disabled), T0, Facts::default()),
            vec![go(T0, None, "disabled")],
            T0 + 5,
        ),
        (
            "all at one millisecond, now too",
            row(Some(State::Active), T0, Facts::default()),
            vec![
                go(T0, None, "disabled"),
                go(T0, Some("disabled"), "enabling"),
                go(T0, Some("enabling"), "active"),
            ],
            T0,
        ),
        (
            "a clock ahead: events after now, and out of order",
            row(Some(State::Active), T0 + DAY, Facts::default()),
            vec![
                go(T0 + DAY, None, "enabling"),
                go(T0, Some("enabling"), "active"),
            ],
            T0,
        ),
        (
            "absurd times",
            row(
                Some(State::TtlWait),
                i64::MAX,
                Facts {
                    lifecycle: LifecycleFacts {
                        t_gone: Some(Timestamp(i64::MIN)),
                        max_ds_ttl: Some(u32::MAX),
                        hold_until: Some(Timestamp(i64::MAX)),
                        dnskey_everywhere_at: Some(Timestamp(-1)),
                        ds_seen_at: Some(Timestamp(i64::MIN)),
                        ..LifecycleFacts::default()
                    },
                    wait: WaitFacts {
                        held_by: Some(Hold::new("x", Party::Ttl)),
                        held_since: Some(Timestamp(i64::MAX)),
                    },
                    ..Facts::default()
                },
            ),
            vec![
                go(i64::MIN, None, "active"),
                go(-5, Some("active"), "ttl_wait"),
                go(i64::MAX, Some("ttl_wait"), "ttl_wait"),
            ],
            i64::MIN,
        ),
        (
            "now at the end of time",
            row(
                Some(State::AwaitingDs),
                0,
                Facts {
                    lifecycle: LifecycleFacts {
                        ds_announced_at: Some(Timestamp(MAX_MS)),
                        ..LifecycleFacts::default()
                    },
                    ..Facts::default()
                },
            ),
            vec![go(0, None, "awaiting_ds")],
            i64::MAX,
        ),
    ];
    for (case, zone, events, now) in cases {
        let svg = std::panic::catch_unwind(|| draw(&zone, &events, now))
            .unwrap_or_else(|_| panic!("{case}: panicked"));
        let doc = parse(&svg);
        let segments = with_class(&doc, "tl-state");
        for s in &segments {
            assert!(num(s, "width") >= 0.5, "{case}");
        }
        // Time only goes forward, whatever the clocks said.
        for pair in segments.windows(2) {
            assert!(num(&pair[0], "x") <= num(&pair[1], "x"), "{case}");
        }
        assert!(svg.len() < 64 * 1024, "{case}");
    }
    let svg = draw(&row(None, T0, Facts::default()), &[], T0);
    assert!(svg.contains("never observed"));
    assert!(svg.contains("no look at the parent yet"));
}

#[test]
fn only_the_last_events_are_drawn_and_the_output_is_bounded() {
    // A hostile history: more events than drawn, each with the longest reason that
    // escapes the most.
    let reason = "\"<&".repeat(10_000);
    let mut events = Vec::new();
    let states = ["active", "awaiting_ds_removal"];
    for i in 0..(MAX_EVENTS + 3_000) {
        let kind = if i % 10 == 0 {
            EventKind::Intent
        } else {
            EventKind::Transition
        };
        events.push(event(
            T0 + i as i64 * MINUTE,
            kind,
            Some(states[i % 2]),
            Some(states[(i + 1) % 2]),
            &reason,
        ));
    }
    let now = T0 + (events.len() as i64 + 1) * MINUTE;
    let mut zone = row(Some(State::Active), T0, Facts::default());
    let answers: Vec<_> = (0..500)
        .map(|i| serde_json::json!({"server": reason, "addr": i, "answer": {"kind": "unknown", "reason": reason}}))
        .collect();
    zone.last_observation = Some(serde_json::json!({"parent": {"answers": answers}}));
    zone.last_observed_at = Some(Timestamp(now));
    let svg = draw(&zone, &events, now);
    assert!(svg.len() < MAX_OUTPUT, "{} bytes", svg.len());
    let doc = parse(&svg);
    let drawn = events.len() - MAX_EVENTS;
    let transitions = events[drawn..]
        .iter()
        .filter(|e| e.kind == EventKind::Transition)
        .count();
    // One stretch before the first transition drawn, one after each.
    assert_eq!(with_class(&doc, "tl-state").len(), transitions + 1);
    assert_eq!(with_class(&doc, "tl-intent").len(), MAX_EVENTS / 10);
    assert!(svg.contains("3000 earlier events not drawn"));
    // The axis starts at the first event drawn (an intent), in the state the first
    // transition drawn leaves.
    assert_eq!(events[drawn].kind, EventKind::Intent);
    let first = &with_class(&doc, "tl-state")[0];
    assert!(title(first).starts_with(&format!(
        "{}: {} → ",
        events[drawn + 1].from.as_deref().unwrap(),
        Timestamp(events[drawn].at.0)
    )));
    assert!((num(first, "x") - PLOT_X0).abs() < 0.01);
    assert_eq!(with_class(&doc, "tl-ds-unknown").len(), 2 * MAX_ADDRESSES);
    assert!(svg.contains(&format!("and {} more addresses", 500 - MAX_ADDRESSES)));
}

#[test]
fn the_parent_rows_read_the_stored_observation() {
    let ds = DsLine::parse(DS).unwrap().ds;
    let answer = |server: &str, addr: &str, answer: DsAnswer| ServerAnswer {
        server: server.into(),
        addr: addr.parse().unwrap(),
        answer,
    };
    // As the engine stores it: `dns::ParentView` serialized.
    let view = ParentView {
        zone: "example.com.".to_string(),
        parent: "com.".to_string(),
        answers: vec![
            answer(
                "a.gtld-servers.net.",
                "192.5.6.30",
                DsAnswer::Present {
                    ds: vec![ds],
                    ttl: 86_400,
                },
            ),
            answer(
                "a.gtld-servers.net.",
                "2001:503:a83e::2:30",
                DsAnswer::Absent,
            ),
            answer(
                "b.gtld-servers.net.",
                "192.33.14.30",
                DsAnswer::Unknown(UnknownReason::Malformed("a CNAME at the apex".to_string())),
            ),
            answer(
                "c.gtld-servers.net.",
                "192.26.92.30",
                DsAnswer::Unknown(UnknownReason::Timeout),
            ),
        ],
        delegations: vec![],
        evidence: Evidence::Validated,
    };
    let mut zone = row(Some(State::AwaitingDs), T0, Facts::default());
    zone.last_observed_at = Some(Timestamp(T0 + HOUR));
    zone.last_observation = Some(serde_json::json!({ "parent": view }));
    let events = [go(T0, Some("enabling"), "awaiting_ds")];
    let svg = draw(&zone, &events, T0 + 2 * HOUR);
    let doc = parse(&svg);
    // Each answer twice: at the time of the look, and at the right end.
    let present = with_class(&doc, "tl-ds-present");
    assert_eq!(present.len(), 2);
    assert!(title(&present[0]).contains("present: 1 DS record, TTL 86400s; evidence validated"));
    assert_eq!(with_class(&doc, "tl-ds-absent").len(), 2);
    let unknown = with_class(&doc, "tl-ds-unknown");
    assert_eq!(unknown.len(), 4);
    assert!(title(&unknown[0]).contains("unknown: malformed: a CNAME at the apex"));
    assert!(title(&unknown[2]).contains("unknown: timeout"));
    let at_look = PLOT_X0 + (PLOT_X1 - PLOT_X0) / 2.0;
    assert!((num(&present[0], "x") + 4.0 - at_look).abs() < 0.01);
    assert_eq!(num(&present[1], "x"), RIGHT_X);

    zone.last_observation =
        Some(serde_json::json!({"parent": {"error": "no parent server answered"}}));
    let svg = draw(&zone, &events, T0 + 2 * HOUR);
    let doc = parse(&svg);
    let failed = with_class(&doc, "tl-ds-failed");
    assert!(failed[0].text().unwrap().contains("could not be asked"));
    assert!(
        failed[0]
            .text()
            .unwrap()
            .contains("no parent server answered")
    );
}

#[test]
fn ds_marks_come_from_the_facts_and_the_transitions_that_mean_them() {
    let facts = Facts {
        lifecycle: LifecycleFacts {
            t_gone: Some(Timestamp(T0 + 5 * HOUR)),
            ds_seen_at: Some(Timestamp(T0 + 4 * HOUR)),
            ..LifecycleFacts::default()
        },
        ..Facts::default()
    };
    let events = [
        go(T0, Some("awaiting_ds"), "ds_observed"),
        go(T0 + HOUR, Some("ds_observed"), "active"),
        go(T0 + 2 * HOUR, Some("awaiting_ds_removal"), "ttl_wait"),
        // A move in found in `disabling`: `T_gone` is not set again by it.
        go(T0 + 3 * HOUR, Some("disabling"), "ttl_wait"),
        // The same instant as the fact: one mark.
        go(T0 + 5 * HOUR, Some("awaiting_ds_removal"), "ttl_wait"),
    ];
    let zone = row(Some(State::TtlWait), T0 + 5 * HOUR, facts);
    let svg = draw(&zone, &events, T0 + 6 * HOUR);
    let doc = parse(&svg);
    assert_eq!(with_class(&doc, "tl-mark-everywhere").len(), 1);
    let gone: Vec<String> = with_class(&doc, "tl-mark-gone").iter().map(title).collect();
    assert_eq!(gone.len(), 2, "{gone:?}");
    assert!(gone[0].starts_with(&Timestamp(T0 + 5 * HOUR).to_string()));
    assert!(gone[0].ends_with("(from the zone's facts)"));
    assert!(gone[1].starts_with(&Timestamp(T0 + 2 * HOUR).to_string()));
    assert!(gone[1].ends_with("(from the transition in the history)"));
    assert_eq!(with_class(&doc, "tl-mark-last-seen").len(), 1);
}

#[test]
fn a_hold_and_an_open_wait_run_to_now() {
    let facts = Facts {
        wait: WaitFacts {
            held_by: Some(Hold::new(
                "the provider's RRset listing fails",
                Party::Provider,
            )),
            held_since: Some(Timestamp(T0 + HOUR)),
        },
        ..Facts::default()
    };
    let zone = row(Some(State::Enabling), T0, facts);
    let svg = draw(
        &zone,
        &[go(T0, Some("disabled"), "enabling")],
        T0 + 2 * HOUR,
    );
    let doc = parse(&svg);
    let hold = &with_class(&doc, "tl-hold")[0];
    assert!((num(hold, "x") - (PLOT_X0 + PLOT_X1) / 2.0).abs() < 0.01);
    assert!((num(hold, "x") + num(hold, "width") - PLOT_X1).abs() < 0.02);
    assert!(title(hold).contains("held: the provider's RRset listing fails (on provider): since"));
    // No deadline: no overdue, however long.
    let wait = &with_class(&doc, "tl-wait")[0];
    assert!(title(wait).contains("no deadline"));
    assert!(with_class(&doc, "tl-overdue").is_empty());
}

#[test]
fn ticks_stay_few_and_on_whole_steps() {
    for span in [MINUTE, HOUR, 7 * HOUR, DAY, 40 * DAY, 3 * 365 * DAY, MAX_MS] {
        let scale = Scale {
            t0: 0.max(T0.min(MAX_MS - span)),
            t1: (T0 + span).min(MAX_MS),
        };
        let scale = if span == MAX_MS {
            Scale { t0: 0, t1: MAX_MS }
        } else {
            scale
        };
        let ticks = ticks(scale);
        assert!((2..=8).contains(&ticks.len()), "{span}: {ticks:?}");
        assert!(ticks.iter().all(|(at, _)| scale.shows(*at)));
    }
    let labels: Vec<String> = ticks(Scale {
        t0: T0,
        t1: T0 + 6 * HOUR,
    })
    .into_iter()
    .map(|t| t.1)
    .collect();
    assert_eq!(labels[0], "06-25 10:00");
    assert_eq!(duration(DAY + 3 * HOUR + 5), "1d 3h");
    assert_eq!(duration(2 * HOUR + 5 * MINUTE), "2h 5m");
    assert_eq!(duration(-5), "0s");
}

/// A realistic history for the lead to look at: `target/timeline-example.svg` (the
/// whole round trip, ending `disabled`) and `target/timeline-example-ttl-wait.svg`
/// (mid-disable, overdue); `rsvg-convert` turns them into PNG.
#[test]
fn renders_a_realistic_history() {
    let m = |t: i64| T0 + t * MINUTE;
    let ev = |at: i64, from: &str, to: &str, reason: &str| {
        event(at, EventKind::Transition, Some(from), Some(to), reason)
    };
    let mut events = vec![
        event(
            m(0),
            EventKind::Transition,
            None,
            Some("disabled"),
            "adopted: DNSSEC is off at the provider",
        ),
        event(
            m(10),
            EventKind::Intent,
            Some("disabled"),
            Some("disabled"),
            "operator asked to enable DNSSEC",
        ),
        ev(
            m(11),
            "disabled",
            "enabling",
            "the operator's intent is enabled: switching DNSSEC on",
        ),
        ev(
            m(11 + 2 * 60 + 5),
            "enabling",
            "awaiting_ds",
            &format!("the propagation hold has passed; DS announced: {DS}"),
        ),
        ev(
            m(11 + 30 * 60),
            "awaiting_ds",
            "ds_observed",
            "every parent server publishes a DS matching the key",
        ),
        ev(
            m(11 + 30 * 60 + 5),
            "ds_observed",
            "active",
            "chain of trust complete: every parent server publishes the DS, and validation from the trust anchor says secure",
        ),
    ];
    let disable = m(11 + 30 * 60 + 5) + 9 * DAY;
    events.push(event(
        disable,
        EventKind::Intent,
        Some("active"),
        Some("active"),
        "operator asked to disable DNSSEC",
    ));
    events.push(ev(
        disable + MINUTE,
        "active",
        "awaiting_ds_removal",
        "the operator's intent is disabled: the DS must be removed at the registrar",
    ));
    let gone = disable + 26 * HOUR;
    let mut ttl_wait_events = events.clone();
    events.push(ev(gone, "awaiting_ds_removal", "ttl_wait", "every parent server answers that the DS is gone; waiting out its TTL (86400s, the largest seen) plus margin"));
    ttl_wait_events.push(events.last().unwrap().clone());
    let waited = gone + DAY + HOUR + 2 * HOUR;
    events.push(event(
        waited + 5 * MINUTE,
        EventKind::Guard,
        Some("ttl_wait"),
        Some("ttl_wait"),
        "refused: a parent server could not be asked",
    ));
    events.push(ev(
        waited + 10 * MINUTE,
        "ttl_wait",
        "disabling",
        "the DS TTL and margin have passed since the DS was gone everywhere: switching DNSSEC off",
    ));
    events.push(ev(
        waited + 12 * MINUTE,
        "disabling",
        "disabled",
        "the provider confirms DNSSEC is off",
    ));
    let now = waited + 2 * DAY;

    let ds = DsLine::parse(DS).unwrap().ds;
    let observation = |present: bool| {
        let answer = |server: &str, addr: &str| ServerAnswer {
            server: server.into(),
            addr: addr.parse().unwrap(),
            answer: if present {
                DsAnswer::Present {
                    ds: vec![ds.clone()],
                    ttl: 86_400,
                }
            } else {
                DsAnswer::Absent
            },
        };
        let mut answers = vec![
            answer("a.gtld-servers.net.", "192.5.6.30"),
            answer("a.gtld-servers.net.", "2001:503:a83e::2:30"),
            answer("b.gtld-servers.net.", "192.33.14.30"),
        ];
        answers.push(ServerAnswer {
            server: "c.gtld-servers.net.".into(),
            addr: "2001:503:83eb::30".parse().unwrap(),
            answer: DsAnswer::Unknown(UnknownReason::Timeout),
        });
        serde_json::json!({ "parent": ParentView {
            zone: "example.com.".to_string(),
            parent: "com.".to_string(),
            answers,
            delegations: vec![],
            evidence: Evidence::Validated,
        }})
    };
    let mut zone = row(
        Some(State::Disabled),
        waited + 12 * MINUTE,
        Facts::default(),
    );
    zone.zone.intent = Intent::Disabled;
    zone.last_observed_at = Some(Timestamp(now - 20 * MINUTE));
    zone.last_observation = Some(observation(false));
    let svg = draw(&zone, &events, now);
    let doc = parse(&svg);
    assert_eq!(with_class(&doc, "tl-state").len(), 9);
    assert_eq!(with_class(&doc, "tl-mark-everywhere").len(), 1);
    assert_eq!(with_class(&doc, "tl-mark-gone").len(), 1);

    // Mid-disable: in `ttl_wait` past its deadline (the daemon was down).
    let facts = Facts {
        lifecycle: LifecycleFacts {
            t_gone: Some(Timestamp(gone)),
            gone_confirmed_at: Some(Timestamp(gone + 3 * HOUR)),
            max_ds_ttl: Some(86_400),
            max_dnskey_ttl: Some(3600),
            ds_first_seen_at: Some(Timestamp(m(11 + 30 * 60))),
            ds_announced_at: Some(Timestamp(m(11 + 2 * 60 + 5))),
            ds_seen_at: Some(Timestamp(gone - 5 * MINUTE)),
            dnskey_everywhere_at: Some(Timestamp(m(11 + 5))),
            hold_until: Some(Timestamp(m(11 + 2 * 60 + 5))),
            ..LifecycleFacts::default()
        },
        ..Facts::default()
    };
    let mut mid = row(Some(State::TtlWait), gone, facts);
    mid.zone.intent = Intent::Disabled;
    mid.last_observed_at = Some(Timestamp(gone + 3 * HOUR));
    mid.last_observation = Some(observation(false));
    let mid_now = waited + 7 * HOUR;
    let mid_svg = draw(&mid, &ttl_wait_events, mid_now);
    let mid_doc = parse(&mid_svg);
    assert_eq!(with_class(&mid_doc, "tl-overdue").len(), 1);

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("timeline-example.svg"), &svg).unwrap();
    std::fs::write(dir.join("timeline-example-ttl-wait.svg"), &mid_svg).unwrap();
}
