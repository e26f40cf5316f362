//! The README's first command, run to the end as CI would run it.

use std::process::Command;

#[test]
fn the_demo_walks_both_zones_on_and_off_and_moves_one_in() {
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
        // The zone moving in, in the safe order (safety rule 9).
        "gamma.test.  (new) -> awaiting_ds_removal",
        "ACTION NEEDED: remove the DS for gamma.test. at the registrar (gamma.test. ",
        "gamma.test.  awaiting_ds_removal -> ttl_wait",
        "gamma.test.  ttl_wait -> awaiting_delegation",
        "ACTION NEEDED: change the NS of gamma.test. at the registrar to: ns1.provider.test., ns2.provider.test.",
        "gamma.test.  awaiting_delegation -> enabling",
        "ACTION NEEDED: enter this DS for gamma.test. at the registrar",
        "gamma.test.  ds_observed -> active",
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
    let gamma = table
        .lines()
        .find(|l| l.starts_with("gamma.test."))
        .unwrap_or_else(|| panic!("gamma.test. in the final table:\n{table}"));
    assert!(gamma.contains(" active "), "{gamma}");
    // The old DS went before the NS change, the NS change before the new DS.
    let at = |needle: &str| {
        stdout
            .find(needle)
            .unwrap_or_else(|| panic!("missing {needle:?}:\n{stdout}"))
    };
    assert!(
        at("[registrar] removed from both TLD servers") < at("ttl_wait -> awaiting_delegation")
    );
    assert!(at("NS now changed on TLD server B") < at("awaiting_delegation -> enabling"));
    assert!(at("awaiting_delegation -> enabling") < at("enter this DS for gamma.test."));
    // On, then off, for alpha and beta; on for gamma: exactly five switches.
    let switches = stdout.matches("PATCH /dns/v2/zones/").count();
    assert_eq!(switches, 5, "{stdout}");
}
