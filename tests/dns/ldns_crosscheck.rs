//! An independent oracle for our DS arithmetic: `ldns-key2ds` from Debian's ldnsutils,
//! which `tests/run.sh` installs. For the provider's published key and for fresh keys of
//! the simulator, in every digest type, our DS must equal ldns's, byte for byte.

use std::process::Command;

use base64::Engine;
use dnssec_warden::dnssec::{DigestType, Dnskey, DsLine};
use dnssec_warden_lab::keys::LabKey;

fn ldns_ds(owner: &str, key: &Dnskey, digest_flag: &str) -> DsLine {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("key");
    let line = format!(
        "{owner} 3600 IN DNSKEY {} {} {} {}\n",
        key.flags,
        key.protocol,
        key.algorithm,
        base64::engine::general_purpose::STANDARD.encode(&key.public_key)
    );
    std::fs::write(&file, line).unwrap();
    let out = Command::new("ldns-key2ds")
        // -f: a DS for a key without the SEP flag too (the lab makes both kinds).
        .args(["-f", "-n", digest_flag])
        .arg(&file)
        .output()
        .expect("ldns-key2ds runs (Debian package ldnsutils; tests/run.sh installs it)");
    assert!(
        out.status.success(),
        "ldns-key2ds failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    DsLine::parse(String::from_utf8_lossy(&out.stdout).trim()).unwrap()
}

#[test]
fn our_ds_equals_ldns_key2ds() {
    let example = Dnskey {
        flags: 257,
        protocol: 3,
        algorithm: 13,
        public_key: base64::engine::general_purpose::STANDARD
            .decode("ahD2C5Th+4NIFmErQPgSe/j6yPc2pbuhr3QcOJImCYHtv/mR/2qP2yHjBE1x20ERnmAnp6e6//g0uYAQKTW+DA==")
            .unwrap(),
    };
    let mut keys = vec![("zxy.com.".to_string(), example)];
    for i in 0..4 {
        keys.push((
            format!("Zone{i}.Example."),
            LabKey::generate(257).unwrap().dnskey().into(),
        ));
    }
    let mut compared = 0;
    for (owner, key) in &keys {
        for (flag, kind) in [
            ("-1", DigestType::Sha1),
            ("-2", DigestType::Sha256),
            ("-4", DigestType::Sha384),
        ] {
            let theirs = ldns_ds(owner, key, flag);
            let ours = key.to_ds(owner, kind).unwrap();
            assert_eq!(theirs.ds, ours, "{owner} {kind:?}");
            assert_eq!(theirs.owner, owner.to_ascii_lowercase());
            compared += 1;
        }
    }
    assert_eq!(compared, 15);
}

/// The lab's DNSSEC arithmetic (`lab/src/dnssec.rs`, which builds the
/// worlds the daemon is tested against) is held to the same independent oracle: were it a
/// copy of the product's with the same mistake, every lab test would pass on it.
#[test]
fn the_labs_ds_equals_ldns_key2ds_too() {
    use dnssec_warden_lab::dnssec::DigestType as LabDigest;
    let mut compared = 0;
    for i in 0..4 {
        let owner = format!("Lab{i}.Example.");
        let lab_key = LabKey::generate(if i % 2 == 0 { 257 } else { 256 })
            .unwrap()
            .dnskey();
        let key: Dnskey = lab_key.clone().into();
        for (flag, kind) in [
            ("-1", LabDigest::Sha1),
            ("-2", LabDigest::Sha256),
            ("-4", LabDigest::Sha384),
        ] {
            let theirs = ldns_ds(&owner, &key, flag);
            let lab = lab_key.to_ds(&owner, kind).unwrap();
            assert_eq!(
                theirs.ds.to_string(),
                lab.to_string(),
                "the lab's DS for {owner} {kind:?}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 12);
}
