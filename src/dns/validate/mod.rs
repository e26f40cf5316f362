//! DNSSEC validation: our own chain from the trust anchor (the validator), one parent
//! server's DS answer proven with the parent's validated keys (proof), signatures already
//! verified (sigcache), the trust anchors, and the verdicts of every validator we ask.
//! Uses networking below it, nothing of the observer.

use std::fmt;

use serde::{Deserialize, Serialize};

pub mod anchor;
pub mod proof;
pub mod sigcache;
pub mod validator;

/// `check --json`'s `validation` verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValidationVerdict {
    Secure,
    Insecure,
    Bogus,
    Unknown,
}

impl fmt::Display for ValidationVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Self::Secure => "secure",
            Self::Insecure => "insecure",
            Self::Bogus => "bogus",
            Self::Unknown => "unknown",
        })
    }
}

/// A validating resolver's or our validator's answer about the zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationProbe {
    /// `validator` for our own, or the resolver's address.
    pub source: String,
    pub verdict: ValidationVerdict,
    /// What was seen: "AD set", "SERVFAIL, EDE 6 (DNSSEC Bogus)", "timeout", …
    pub detail: String,
}

/// Combines probes: any bogus is bogus; otherwise the probes that knew must agree.
pub fn combine_validation(probes: &[ValidationProbe]) -> ValidationVerdict {
    if probes.iter().any(|p| p.verdict == ValidationVerdict::Bogus) {
        return ValidationVerdict::Bogus;
    }
    let known: Vec<ValidationVerdict> = probes
        .iter()
        .map(|p| p.verdict)
        .filter(|v| *v != ValidationVerdict::Unknown)
        .collect();
    match known.first() {
        Some(first) if known.iter().all(|v| v == first) => *first,
        _ => ValidationVerdict::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_combines_conservatively() {
        use ValidationVerdict::*;
        let p = |v| ValidationProbe {
            source: "x".into(),
            verdict: v,
            detail: String::new(),
        };
        assert_eq!(combine_validation(&[p(Secure), p(Secure)]), Secure);
        assert_eq!(combine_validation(&[p(Secure), p(Unknown)]), Secure);
        assert_eq!(combine_validation(&[p(Secure), p(Bogus)]), Bogus);
        assert_eq!(combine_validation(&[p(Secure), p(Insecure)]), Unknown);
        assert_eq!(combine_validation(&[]), Unknown);
    }
}
