//! The README's first command, run to the end as CI would run it.

use std::process::Command;

#[test]
fn the_demo_walks_both_zones_on_and_off_and_moves_one_in_then_plays_the_second_act() {
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
        "provider gcore: DNSSEC switched off (every parent server confirmed no DS just before)",
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
    the_second_act(&stdout, table);
}

/// The second act: delta.test. enabled through the registry, with no registrar step;
/// echo.test. moved from west to east by a signed move, every phase in order, the
/// validating resolver "secure" at each, and never anything else.
fn the_second_act(stdout: &str, table: &str) {
    let act = stdout
        .split("Act two:")
        .nth(1)
        .unwrap_or_else(|| panic!("no second act:\n{stdout}"));
    let act = act.split("Final status:").next().unwrap_or_default();
    for needle in [
        "delta.test.  disabled -> enabling",
        "delta.test.  [effect] provider west: publishes the CDS and CDNSKEY of the key",
        "delta.test.  [effect] NOTIFY(CDS) for the key ",
        "sent to registry.nic.test. (127.0.53.12 port ",
        "delta.test.  [registry] NOTIFY(CDS) received",
        "delta.test.  [registry] published: delta.test. ",
        "delta.test.  awaiting_ds -> ds_observed",
        "delta.test.  ds_observed -> active",
        "resolver: delta.test. is secure",
        "echo.test.   signed move from west to east declared",
        "echo.test.   [registrar] DS added on both TLD servers",
        "echo.test.   [registrar] NS changed on both TLD servers to: ns1.east.test. ns2.east.test.",
        "echo.test.   [registrar] old DS removed from both TLD servers",
        "echo.test.   [effect] provider west: DNSSEC switched off",
        "signed move from provider west to east ended: the zone is at provider east only",
        "resolver: echo.test. after the move: secure",
        "never anything else",
    ] {
        assert!(act.contains(needle), "missing {needle:?}:\n{act}");
    }
    // No registrar step for the zone the registry enabled.
    assert!(
        !act.contains("ACTION NEEDED: enter this DS for delta.test."),
        "{act}"
    );
    // Every phase, in order, each with the resolver's verdict: secure.
    let mut last = 0;
    for phase in [
        "signing_at_target",
        "exchanging_keys",
        "awaiting_both_ds",
        "awaiting_delegation",
        "old_delegation_wait",
        "awaiting_old_ds_removal",
        "retiring_old_key",
        "old_signing_off",
        "done",
    ] {
        let line = format!("resolver: echo.test. in phase {phase}: secure (");
        let at = act
            .find(&line)
            .unwrap_or_else(|| panic!("no verdict {line:?}:\n{act}"));
        assert!(at > last, "{phase} out of order:\n{act}");
        last = at;
    }
    for verdict in ["insecure", "bogus", "unknown"] {
        assert!(
            !act.lines()
                .any(|l| l.contains("resolver: ") && l.contains(&format!(": {verdict} ("))),
            "a verdict {verdict}:\n{act}"
        );
    }
    // The registrar's steps in the signed order.
    let at = |needle: &str| {
        act.find(needle)
            .unwrap_or_else(|| panic!("missing {needle:?}:\n{act}"))
    };
    assert!(at("DS added on both TLD servers") < at("NS changed on both TLD servers"));
    assert!(at("NS changed on both TLD servers") < at("old DS removed from both TLD servers"));
    for zone in ["delta.test.", "echo.test."] {
        let line = table
            .lines()
            .find(|l| l.starts_with(zone))
            .unwrap_or_else(|| panic!("{zone} in the final table:\n{table}"));
        assert!(line.contains(" active "), "{line}");
    }
    // The moving zone settled at the target alone: no provider line under it.
    assert!(!table.contains("PROVIDER"), "{table}");
}
