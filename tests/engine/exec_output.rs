//! The daemon's log must stay its own: what an exec hook prints never reaches the daemon's
//! streams as it is. The lines are those the test's thread logs (`test_support::logs`): the
//! hook runs on the test's current-thread runtime, and the tests beside it in this binary
//! log on their own threads.

use std::time::Duration;

use dnssec_warden::alert::exec::{OUTPUT_CAP, run};
use dnssec_warden_test_support::logs;

/// One daemon line, each stream an escaped field of at most `OUTPUT_CAP` bytes, however
/// much the command printed; lines it prints that look like the daemon's stay inside it.
#[tokio::test]
async fn output_is_captured_bounded_and_escaped() {
    let lines = logs::capture();
    let forged = "2026-01-01T00:00:00.000000Z  WARN forged: DNSSEC switched off";
    let script = format!(
        "printf '%s\\n' '{forged}'; printf '%s\\n' '{forged}' >&2; \
         head -c 3000000 /dev/zero | tr '\\0' x; head -c 3000000 /dev/zero | tr '\\0' y >&2"
    );
    let argv: Vec<String> = ["/bin/sh", "-c", &script]
        .iter()
        .map(|w| w.to_string())
        .collect();
    let started = std::time::Instant::now();
    run(&argv, &[], b"", Duration::from_secs(20)).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    let log = lines.text();
    assert!(log.len() < 3 * OUTPUT_CAP, "{} bytes logged", log.len());
    let said: Vec<&str> = log.lines().filter(|l| l.contains("forged")).collect();
    assert_eq!(said.len(), 1, "one daemon line: {said:?}");
    let line = said[0];
    assert!(!line.starts_with(forged), "{line}");
    assert!(line.contains("output of the command"), "{line}");
    assert!(
        line.contains(&format!("stdout=\"{forged}\\nxxx")),
        "escaped: {line:.300}"
    );
    let printed = 3_000_000 + forged.len() + 1;
    for stream in ["stdout", "stderr"] {
        let field = format!("{stream}_bytes={printed}");
        assert!(line.contains(&field), "{field} in {line:.300}");
    }
}
