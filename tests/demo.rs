//! The README's first command, run to the end as CI would run it.

use std::process::Command;

#[test]
fn the_demo_walks_both_zones_on_and_off() {
    let out = Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
        .arg("demo")
        .output()
        .expect("the demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{stderr}");
    for needle in [
        "alpha.test.  awaiting_ds -> ds_observed",
        "ds_observed -> active",
        "alert ds_unpublished_overdue (warning): beta.test.",
        "alert ds_unpublished_overdue resolved",
        "awaiting_ds_removal -> ttl_wait",
        "disabling -> disabled",
        "provider: DNSSEC switched off (every parent server confirmed no DS just before)",
    ] {
        assert!(stdout.contains(needle), "missing {needle:?}:\n{stdout}");
    }
    // The final status table: both zones disabled.
    let table = stdout
        .split("Final status:")
        .nth(1)
        .expect("a final status");
    for zone in ["alpha.test.", "beta.test."] {
        let line = table
            .lines()
            .find(|l| l.starts_with(zone))
            .unwrap_or_else(|| panic!("{zone} in the final table:\n{table}"));
        assert!(line.contains(" disabled "), "{line}");
    }
    // On, then off, for each zone: exactly four switches.
    let switches = stdout.matches("PATCH /dns/v2/zones/").count();
    assert_eq!(switches, 4, "{stdout}");
}
