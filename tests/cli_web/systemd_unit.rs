//! `systemd-analyze verify` on the shipped unit (the Debian package's; the package as
//! installed is checked by tests/debian_package.sh), with ExecStart pointed at the binary
//! just built (verify insists that the program exists). Unknown keys and unparsable
//! values only give a warning and exit status 0, so any diagnostic naming the unit fails
//! the test too. `systemd` is installed by tests/run.sh; without it this test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

const UNIT: &str = "dnssec-warden.service";

fn shipped_unit() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("systemd")
        .join(UNIT);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The unit with ExecStart's program replaced by the built binary, in a fresh directory.
fn installable(text: &str, dir: &Path) -> PathBuf {
    let binary = env!("CARGO_BIN_EXE_dnssec-warden");
    let mut rewritten = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|line| match line.strip_prefix("ExecStart=") {
            Some(command) => {
                rewritten += 1;
                let (program, args) = command.split_once(' ').unwrap_or((command, ""));
                assert_eq!(program, "/usr/bin/dnssec-warden");
                format!("ExecStart={binary} {args}")
            }
            None => line.to_string(),
        })
        .collect();
    assert_eq!(rewritten, 1, "one ExecStart=");
    let path = dir.join(UNIT);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// Runs `systemd-analyze verify`; the diagnostics about our unit, or an error.
fn verify(unit: &Path) -> Result<(), String> {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg("--man=no")
        .arg(unit)
        .output()
        .unwrap_or_else(|e| {
            panic!("systemd-analyze is needed (package systemd, see tests/run.sh): {e}")
        });
    let stderr = String::from_utf8_lossy(&out.stderr);
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("dnssec-warden"))
        .collect();
    if !out.status.success() || !ours.is_empty() {
        return Err(format!("{}\n{stderr}", out.status));
    }
    Ok(())
}

#[test]
fn the_unit_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let unit = installable(&shipped_unit(), dir.path());
    verify(&unit).unwrap_or_else(|e| panic!("systemd-analyze verify {}: {e}", unit.display()));
}

#[test]
fn verify_catches_what_it_only_warns_about() {
    // The check above is only worth something if a typo fails it.
    let dir = tempfile::tempdir().unwrap();
    let broken = shipped_unit().replace("ProtectHome=yes", "ProtectHome=yes\nProtectHomee=yes");
    let unit = installable(&broken, dir.path());
    assert!(verify(&unit).is_err());
}

#[test]
fn the_unit_is_hardened() {
    let text = shipped_unit();
    for line in [
        "Type=notify",
        "NotifyAccess=main",
        "Restart=on-failure",
        "User=dnssec-warden",
        "Group=dnssec-warden",
        "ConditionPathExists=/etc/dnssec-warden/api-key",
        "RestartPreventExitStatus=2",
        "StateDirectory=dnssec-warden",
        "StateDirectoryMode=0750",
        "UMask=0027",
        "ConfigurationDirectory=dnssec-warden",
        "LoadCredential=gcore-api-key:/etc/dnssec-warden/api-key",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "NoNewPrivileges=yes",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "SystemCallFilter=@system-service",
        "CapabilityBoundingSet=",
        "LockPersonality=yes",
        "MemoryDenyWriteExecute=yes",
        "RestrictNamespaces=yes",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing");
    }
    assert!(text.lines().any(|l| l.starts_with("WatchdogSec=")));
    // The package's system user (systemd/dnssec-warden.sysusers), so that its group can
    // read the state: no dynamic user.
    assert!(!text.lines().any(|l| l.starts_with("DynamicUser=")));
    let sysusers = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/dnssec-warden.sysusers"),
    )
    .unwrap();
    assert!(
        sysusers
            .lines()
            .any(|l| l.starts_with("u dnssec-warden - ")),
        "the sysusers file creates the unit's user and group"
    );

    // systemd's own judgement of the sandbox: "OK" (below 2.0 on its 0-10 scale).
    let dir = tempfile::tempdir().unwrap();
    let unit = installable(&text, dir.path());
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--threshold=20", "--no-pager"])
        .arg(&unit)
        .output()
        .expect("systemd-analyze");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exposure above 2.0:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
