//! The work one answer can cost our validator is bounded the way
//! Unbound and BIND bounded theirs after KeyTrap (CVE-2023-50387): records de-duplicated
//! first, at most `MAX_SIGNATURES_PER_RRSET` signatures tried over one RRset and
//! `MAX_KEYS_PER_TAG` keys per signature, every check charged to the observation's budget
//! (`MAX_SIGNATURE_CHECKS`); work cut short is unknown, never `secure`. And an RRset whose
//! server repeats a record still verifies (RFC 4034 section 6.3: the canonical form has no
//! duplicates), as Unbound verifies it.

use dnssec_warden::dns::budget::MAX_SIGNATURE_CHECKS;
use dnssec_warden::dns::classify::classify_dnskey;
use dnssec_warden::dns::validator::{
    MAX_SIGNATURES_PER_RRSET, VerifyError, self_signers, verify_rrset,
};
use dnssec_warden::dns::wire::parse_name;
use dnssec_warden::dns::{Budget, DnskeyAnswer};
use dnssec_warden::dnssec::Dnskey;
use dnssec_warden_lab::dns::zone::{dnskey_rdata, sign};
use dnssec_warden_lab::keys::LabKey;
use hickory_proto::dnssec::rdata::{DNSSECRData, RRSIG};
use hickory_proto::op::{Message, MessageType, OpCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};

const ZONE: &str = "trap.test.";

fn now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as u32
}

fn budget() -> Budget {
    Budget::new(Default::default())
}

struct Zone {
    name: Name,
    key: LabKey,
    dnskey: Dnskey,
}

impl Zone {
    fn new() -> Self {
        let key = LabKey::generate(257).expect("key");
        let dnskey = Dnskey::from(key.dnskey());
        Self {
            name: parse_name(ZONE).expect("name"),
            key,
            dnskey,
        }
    }

    fn dnskey_record(&self) -> Record {
        Record::from_rdata(self.name.clone(), 300, dnskey_rdata(&self.key.dnskey()))
    }

    /// A valid RRSIG by the zone's key over exactly `set`.
    fn rrsig(&self, set: &[Record]) -> Record {
        let t = now();
        sign(
            set,
            RecordType::DNSKEY,
            &self.name,
            &self.name,
            &self.key,
            300,
            (t - 60, t + 86_400),
        )
        .expect("signed")
    }

    /// The zone's DNSKEY set in `records` verified with its key, now.
    fn verify(
        &self,
        records: &[Record],
        budget: &Budget,
    ) -> Result<dnssec_warden::dns::validator::Verified, VerifyError> {
        verify_rrset(
            records,
            &self.name,
            RecordType::DNSKEY,
            ZONE,
            std::slice::from_ref(&self.dnskey),
            now(),
            budget,
        )
    }

    /// The KeyTrap-shaped DNSKEY answer: `copies` copies of the key, `garbage` RRSIGs
    /// carrying its tag whose signatures are noise, then one valid RRSIG.
    fn keytrap(&self, copies: usize, garbage: usize) -> Vec<Record> {
        let key = self.dnskey_record();
        let valid = self.rrsig(std::slice::from_ref(&key));
        let RData::DNSSEC(DNSSECRData::RRSIG(sig)) = &valid.data else {
            panic!("not an RRSIG: {valid:?}");
        };
        let mut records = vec![key; copies];
        for i in 0..garbage {
            let noise: Vec<u8> = (0..64)
                .map(|b| (b as u8).wrapping_mul(i as u8 | 1))
                .collect();
            records.push(Record::from_rdata(
                self.name.clone(),
                300,
                RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(
                    sig.input().clone(),
                    noise,
                ))),
            ));
        }
        records.push(valid);
        records
    }
}

/// One child address's KeyTrap answer (300 copies of the key, 300 garbage RRSIGs with its
/// tag, then the valid one): at most `MAX_SIGNATURES_PER_RRSET` checks, and the verdict
/// is "budget exhausted", never a verified set. Before this rule every one of the 300
/// was tried, over a set of 300 keys (about 10 s of CPU an address).
#[test]
fn a_keytrap_answer_costs_a_few_checks_and_is_never_verified() {
    let zone = Zone::new();
    let records = zone.keytrap(300, 300);
    let budget = budget();
    let verdict = zone.verify(&records, &budget);
    assert!(
        matches!(&verdict, Err(VerifyError::Exhausted(d)) if d.contains("validation budget exhausted")),
        "{verdict:?}"
    );
    assert!(
        budget.signature_checks() as usize <= MAX_SIGNATURES_PER_RRSET,
        "{} checks",
        budget.signature_checks()
    );
    // The self-signature check of the child view: unknown, not "not signed".
    let budget = self::budget();
    assert!(matches!(
        self_signers(
            &records,
            &zone.name,
            std::slice::from_ref(&zone.dnskey),
            now(),
            &budget
        ),
        Err(VerifyError::Exhausted(_))
    ));
    let mut message = Message::new(1, MessageType::Response, OpCode::Query);
    message.metadata.authoritative = true;
    message.answers = records;
    let answer = classify_dnskey(
        &zone.name,
        &Ok(std::sync::Arc::new(message)),
        None,
        None,
        now(),
        &budget,
    );
    assert!(matches!(answer, DnskeyAnswer::Unknown(_)), "{answer:?}");
}

/// Many such addresses in one observation (20 NS x 8 addresses at most): the whole look
/// spends at most `MAX_SIGNATURE_CHECKS`, then every further check fails at once.
#[test]
fn an_observation_spends_at_most_its_signature_budget() {
    let zone = Zone::new();
    let records = zone.keytrap(300, 300);
    let budget = budget();
    for _ in 0..160 {
        let verdict = zone.verify(&records, &budget);
        assert!(
            matches!(verdict, Err(VerifyError::Exhausted(_))),
            "{verdict:?}"
        );
    }
    assert_eq!(budget.signature_checks(), MAX_SIGNATURE_CHECKS);
}

/// The caps cut only hostile answers: a valid signature after 7 garbage ones (within
/// `MAX_SIGNATURES_PER_RRSET`) still verifies.
#[test]
fn the_valid_signature_among_the_first_few_verifies() {
    let zone = Zone::new();
    let signed = zone.keytrap(1, MAX_SIGNATURES_PER_RRSET - 1);
    let budget = budget();
    let verdict = zone.verify(&signed, &budget);
    assert!(verdict.is_ok(), "{verdict:?}");
}

/// RFC 4034 section 6.3: a server repeating a DNSKEY (or a DS) signed over the set
/// without duplicates still verifies, as Unbound verifies it; the repeated key is one key.
#[test]
fn a_repeated_record_still_verifies() {
    let zone = Zone::new();
    let key = zone.dnskey_record();
    let sig = zone.rrsig(std::slice::from_ref(&key));
    let records = vec![key.clone(), key.clone(), key, sig];
    let budget = budget();
    let verdict = zone.verify(&records, &budget);
    assert!(verdict.is_ok(), "{verdict:?}");
    assert_eq!(
        self_signers(
            &records,
            &zone.name,
            std::slice::from_ref(&zone.dnskey),
            now(),
            &budget
        ),
        Ok(vec![0])
    );
}
