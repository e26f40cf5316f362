//! [`ZoneName`]: the one rule for what names a zone, wherever a name comes in (the
//! configuration file, the command line, the provider's account listing).
//!
//! A zone is what the provider hosts and the registrar delegates: a host name (RFC 952,
//! RFC 1123 section 2.1: letters, digits and hyphens, no hyphen at either end of a label)
//! of at least two labels, written in A-labels. Internationalised names are converted with
//! IDNA (UTS #46, non-transitional, as browsers and registries do), so `bücher.example`
//! and `xn--bcher-kva.example` are the same zone, stored as `xn--bcher-kva.example.`.
//! Refused: the root, a top-level domain alone (no provider hosts one for a customer),
//! names whose last label is all digits (`127.0.0.1` is an address, and no top-level
//! domain is numeric), labels over 63 octets and names over 255 octets in wire form.

use std::fmt;
use std::str::FromStr;

use idna::uts46::{AsciiDenyList, DnsLength, Hyphens, Uts46};

/// Longest label, in octets (RFC 1035 section 2.3.4).
pub const MAX_LABEL: usize = 63;
/// Longest name in wire form, in octets, the root label included (RFC 1035 section 2.3.4).
pub const MAX_NAME: usize = 255;

/// A zone name in its one canonical form: A-labels, lower case, with the trailing dot
/// (`xn--bcher-kva.example.`). Only [`ZoneName::parse`] makes one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZoneName(String);

/// Why a name is not a zone name; the message quotes the name as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("zone name {input:?}: {problem}")]
pub struct ZoneNameError {
    pub input: String,
    pub problem: ZoneNameProblem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneNameProblem {
    #[error("is empty")]
    Empty,
    #[error("is the root zone, which cannot be managed at a provider")]
    Root,
    #[error("has an empty label (a leading dot or two dots in a row)")]
    EmptyLabel,
    #[error("label {label:?} has a character not allowed in a host name: {ch:?}")]
    Character { label: String, ch: char },
    #[error("label {label:?} starts or ends with a hyphen, which a host name may not")]
    Hyphen { label: String },
    #[error("label {label:?} is {len} octets long; a label has at most 63")]
    LabelTooLong { label: String, len: usize },
    #[error("is {len} octets long in wire form; a name has at most 255")]
    TooLong { len: usize },
    #[error(
        "is a top-level domain alone; a zone at a provider has at least two labels (like example.com)"
    )]
    SingleLabel,
    #[error("looks like an IP address, not a domain name (its last label {label:?} is all digits)")]
    Numeric { label: String },
    #[error("is not a valid internationalised domain name (IDNA, UTS #46)")]
    Idna,
    #[error("is not in canonical form (that is {canonical:?})")]
    NotCanonical { canonical: String },
}

impl ZoneName {
    /// Checks `input` and gives its canonical form. Accepts U-labels and A-labels in any
    /// case, with or without the trailing dot.
    pub fn parse(input: &str) -> Result<Self, ZoneNameError> {
        Self::parse_labels(input, 2)
    }

    /// A parent zone's name (`[parents."ch."]`): as [`Self::parse`], but a top-level
    /// domain alone is one too.
    pub fn parse_parent(input: &str) -> Result<Self, ZoneNameError> {
        Self::parse_labels(input, 1)
    }

    fn parse_labels(input: &str, least: usize) -> Result<Self, ZoneNameError> {
        let fail = |problem| ZoneNameError {
            input: input.to_string(),
            problem,
        };
        if input.is_empty() {
            return Err(fail(ZoneNameProblem::Empty));
        }
        let relative = input.strip_suffix('.').unwrap_or(input);
        if relative.is_empty() {
            return Err(fail(ZoneNameProblem::Root));
        }
        // The ASCII part of every label as written, so that the message names the label
        // the operator typed; what IDNA maps is checked again on its output.
        for label in relative.split('.') {
            check_ascii(label).map_err(fail)?;
        }
        let ascii = Uts46::new()
            .to_ascii(
                relative.as_bytes(),
                AsciiDenyList::EMPTY,
                Hyphens::Allow,
                DnsLength::Ignore,
            )
            .map_err(|_| fail(ZoneNameProblem::Idna))?
            .to_ascii_lowercase();
        let labels: Vec<&str> = ascii.split('.').collect();
        let mut wire = 1;
        for label in &labels {
            check_ascii(label).map_err(fail)?;
            if label.len() > MAX_LABEL {
                return Err(fail(ZoneNameProblem::LabelTooLong {
                    label: label.to_string(),
                    len: label.len(),
                }));
            }
            wire += label.len() + 1;
        }
        if wire > MAX_NAME {
            return Err(fail(ZoneNameProblem::TooLong { len: wire }));
        }
        if let Some(last) = labels.last()
            && last.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(fail(ZoneNameProblem::Numeric {
                label: last.to_string(),
            }));
        }
        if labels.len() < least {
            return Err(fail(ZoneNameProblem::SingleLabel));
        }
        Ok(Self(format!("{ascii}.")))
    }

    /// A name read back from where only canonical names are written (the store): kept
    /// as it is when already in canonical form, without IDNA's work again; a name that
    /// is not a zone name, or not in its canonical form, is an error.
    pub fn from_canonical(text: String) -> Result<Self, ZoneNameError> {
        let ascii_lower = text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        let labels: Vec<&str> = match text.strip_suffix('.') {
            Some(relative) if ascii_lower => relative.split('.').collect(),
            _ => Vec::new(),
        };
        let plain = labels.len() >= 2
            && text.len() < MAX_NAME
            && labels
                .iter()
                .all(|l| check_ascii(l).is_ok() && l.len() <= MAX_LABEL && !l.starts_with("xn--"))
            && labels
                .last()
                .is_some_and(|l| !l.bytes().all(|b| b.is_ascii_digit()));
        if plain {
            return Ok(Self(text));
        }
        let parsed = Self::parse(&text)?;
        if parsed.0 != text {
            return Err(ZoneNameError {
                input: text,
                problem: ZoneNameProblem::NotCanonical {
                    canonical: parsed.0,
                },
            });
        }
        Ok(parsed)
    }

    /// `xn--bcher-kva.example.`
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// The name for people: U-labels where the A-labels decode (`bücher.example.`).
    pub fn unicode(&self) -> String {
        let (text, result) = idna::domain_to_unicode(&self.0);
        if result.is_ok() { text } else { self.0.clone() }
    }
}

/// Letters, digits and hyphens; no hyphen first or last. Non-ASCII characters are left
/// to IDNA.
fn check_ascii(label: &str) -> Result<(), ZoneNameProblem> {
    if label.is_empty() {
        return Err(ZoneNameProblem::EmptyLabel);
    }
    if let Some(ch) = label
        .chars()
        .find(|c| c.is_ascii() && !(c.is_ascii_alphanumeric() || *c == '-'))
    {
        return Err(ZoneNameProblem::Character {
            label: label.to_string(),
            ch,
        });
    }
    if label.starts_with('-') || label.ends_with('-') {
        return Err(ZoneNameProblem::Hyphen {
            label: label.to_string(),
        });
    }
    Ok(())
}

impl fmt::Display for ZoneName {
    /// Honours width and alignment (`{:<28}`), as tables need.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl AsRef<str> for ZoneName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for ZoneName {
    type Err = ZoneNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(input: &str) -> String {
        ZoneName::parse(input)
            .unwrap_or_else(|e| panic!("{input:?}: {e}"))
            .into_string()
    }

    fn problem(input: &str) -> ZoneNameProblem {
        match ZoneName::parse(input) {
            Ok(name) => panic!("{input:?} was accepted as {name}"),
            Err(e) => {
                assert_eq!(e.input, input);
                e.problem
            }
        }
    }

    #[test]
    fn a_parent_may_be_a_top_level_domain_alone() {
        assert_eq!(ZoneName::parse_parent("CH").unwrap().as_str(), "ch.");
        assert_eq!(ZoneName::parse_parent("co.UK.").unwrap().as_str(), "co.uk.");
        assert!(ZoneName::parse("ch.").is_err());
        assert!(ZoneName::parse_parent(".").is_err());
        assert!(ZoneName::parse_parent("bad name").is_err());
    }

    #[test]
    fn a_stored_name_is_taken_back_only_in_canonical_form() {
        for name in ["example.com.", "xn--bcher-kva.example.", "a-1.b2.test."] {
            assert_eq!(
                ZoneName::from_canonical(name.into()).unwrap().as_str(),
                name
            );
        }
        for (name, canonical) in [
            ("Example.com.", "example.com."),
            ("example.com", "example.com."),
        ] {
            assert_eq!(
                ZoneName::from_canonical(name.into()).unwrap_err().problem,
                ZoneNameProblem::NotCanonical {
                    canonical: canonical.into()
                }
            );
        }
        for name in [
            "com.",
            "-a.example.",
            "a..example.",
            "1.2.3.4.",
            "xn--zz.example.",
            "",
        ] {
            assert!(ZoneName::from_canonical(name.into()).is_err(), "{name:?}");
        }
    }

    #[test]
    fn canonical_form_is_lower_case_a_labels_with_the_dot() {
        assert_eq!(ok("example.com"), "example.com.");
        assert_eq!(ok("Example.COM."), "example.com.");
        assert_eq!(ok("shop.test"), "shop.test.");
        assert_eq!(ok("a-b.c0.example"), "a-b.c0.example.");
        assert_eq!(ok("123.example"), "123.example.");
    }

    #[test]
    fn u_labels_and_a_labels_are_one_name() {
        assert_eq!(ok("bücher.example"), "xn--bcher-kva.example.");
        assert_eq!(ok("BÜCHER.Example."), "xn--bcher-kva.example.");
        assert_eq!(ok("xn--bcher-kva.example"), "xn--bcher-kva.example.");
        assert_eq!(ok("XN--BCHER-KVA.EXAMPLE"), "xn--bcher-kva.example.");
        assert_eq!(ok("münchen.de"), "xn--mnchen-3ya.de.");
        // UTS #46 non-transitional: ß stays ß (as in browsers and at DENIC).
        assert_eq!(ok("straße.de"), "xn--strae-oqa.de.");
        // An ideographic full stop separates labels too.
        assert_eq!(ok("例え。テスト"), ok("例え.テスト"));
        assert_eq!(
            ZoneName::parse("xn--bcher-kva.example").unwrap().unicode(),
            "bücher.example."
        );
    }

    #[test]
    fn characters_outside_host_names_are_named() {
        let e = ZoneName::parse("a/b.example").unwrap_err();
        assert_eq!(
            e.to_string(),
            "zone name \"a/b.example\": label \"a/b\" has a character not allowed in a host name: '/'"
        );
        for (input, ch) in [
            ("a?b.example", '?'),
            ("a#b.example", '#'),
            ("*.example", '*'),
            ("a\0b.example", '\0'),
            ("_dmarc.example", '_'),
            ("a b.example", ' '),
            ("a\\.b.example", '\\'),
            ("a@b.example", '@'),
            ("a:b.example", ':'),
        ] {
            assert!(
                matches!(problem(input), ZoneNameProblem::Character { ch: c, .. } if c == ch),
                "{input:?}"
            );
        }
        // A non-ASCII character that IDNA maps to one: the fullwidth solidus is a '/'.
        assert!(matches!(
            problem("a／b.example"),
            ZoneNameProblem::Character { ch: '/', .. }
        ));
        assert!(matches!(
            problem("-a.example"),
            ZoneNameProblem::Hyphen { .. }
        ));
        assert!(matches!(
            problem("a-.example"),
            ZoneNameProblem::Hyphen { .. }
        ));
    }

    #[test]
    fn the_root_tlds_and_addresses_are_not_zones() {
        assert_eq!(problem("."), ZoneNameProblem::Root);
        assert_eq!(problem(""), ZoneNameProblem::Empty);
        assert_eq!(problem("com"), ZoneNameProblem::SingleLabel);
        assert_eq!(problem("com."), ZoneNameProblem::SingleLabel);
        assert!(matches!(
            problem("127.0.0.1"),
            ZoneNameProblem::Numeric { .. }
        ));
        assert!(matches!(
            problem("10.in-addr.123"),
            ZoneNameProblem::Numeric { .. }
        ));
        assert!(matches!(
            problem("::1"),
            ZoneNameProblem::Character { ch: ':', .. }
        ));
        assert_eq!(problem("a..example"), ZoneNameProblem::EmptyLabel);
        assert_eq!(problem(".example"), ZoneNameProblem::EmptyLabel);
        assert_eq!(problem("example.com.."), ZoneNameProblem::EmptyLabel);
    }

    #[test]
    fn lengths_are_counted_in_octets_of_the_a_labels() {
        let l63 = "a".repeat(63);
        assert_eq!(ok(&format!("{l63}.example")), format!("{l63}.example."));
        assert!(matches!(
            problem(&format!("{}.example", "a".repeat(64))),
            ZoneNameProblem::LabelTooLong { len: 64, .. }
        ));
        // 4 labels of 63 + "ab": 4 * 64 + 3 + 1 = 260 octets.
        let long = format!("{l63}.{l63}.{l63}.{l63}.ab");
        assert!(matches!(problem(&long), ZoneNameProblem::TooLong { .. }));
        // 3 * 64 + 61 + 1 + 1 = 255: the longest there is.
        let longest = format!("{l63}.{l63}.{l63}.{}", "b".repeat(61));
        assert_eq!(ok(&longest).len(), 254);
        // A U-label is short in characters and long in A-label octets.
        let wide = format!("{}.example", "ü".repeat(60));
        assert!(matches!(
            problem(&wide),
            ZoneNameProblem::LabelTooLong { .. }
        ));
    }

    #[test]
    fn invalid_idna_is_refused() {
        assert_eq!(
            problem("xn--zz-.example"),
            ZoneNameProblem::Hyphen {
                label: "xn--zz-".into()
            }
        );
        assert_eq!(problem("xn--a.example"), ZoneNameProblem::Idna);
        // A lone combining mark cannot start a label.
        assert_eq!(problem("\u{0301}a.example"), ZoneNameProblem::Idna);
    }
}
