//! The Prometheus alerting rules shipped in `prometheus/`: valid for `promtool`, and each
//! rule firing (and not firing) on scripted series as its unit tests say.

use std::path::Path;
use std::process::Command;

fn promtool(args: &[&str]) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("prometheus");
    let out = Command::new("promtool")
        .args(args)
        .current_dir(&dir)
        .output()
        .expect("promtool runs (Debian package prometheus; tests/run.sh installs it)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn the_rules_are_valid_and_their_unit_tests_pass() {
    let checked = promtool(&["check", "rules", "dnssec-warden.rules.yml"]);
    assert!(checked.contains("SUCCESS: 9 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "dnssec-warden.rules.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// Every alert the daemon can raise is covered by the open-alert rules (they select by
/// severity, so a new kind needs no new rule, but a new severity would).
#[test]
fn every_alert_severity_has_a_rule() {
    let rules = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("prometheus/dnssec-warden.rules.yml"),
    )
    .unwrap();
    for kind in dnssec_warden::lifecycle::AlertKind::ALL {
        let selector = format!(
            "dnssec_warden_alerts_open{{severity=\"{}\"}}",
            kind.severity().as_str()
        );
        assert!(rules.contains(&selector), "no rule selects {selector}");
    }
}
