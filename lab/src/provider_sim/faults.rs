//! Fault injection: what the simulator does instead of answering.

use std::time::Duration;

/// What goes wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultKind {
    /// Answer with this status and `{"error":"injected fault"}`.
    Status(u16),
    /// `429`, with `Retry-After: n` when given.
    RateLimit { retry_after: Option<u64> },
    /// Never answer (the client's timeout has to fire).
    Hang,
    /// `200` with a body that is not valid JSON.
    Malformed,
}

/// How many requests it hits.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultCount {
    /// The next `n` matching requests.
    Next(u32),
    /// This share (0.0 to 1.0) of matching requests, until cleared.
    Share(f64),
}

/// A fault on requests whose path starts with `path_prefix` (all API requests if `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    pub kind: FaultKind,
    pub count: FaultCount,
    pub path_prefix: Option<String>,
}

impl Fault {
    pub fn next(n: u32, kind: FaultKind) -> Self {
        Self {
            kind,
            count: FaultCount::Next(n),
            path_prefix: None,
        }
    }

    pub fn share(share: f64, kind: FaultKind) -> Self {
        Self {
            kind,
            count: FaultCount::Share(share.clamp(0.0, 1.0)),
            path_prefix: None,
        }
    }

    pub fn on_paths(mut self, prefix: &str) -> Self {
        self.path_prefix = Some(prefix.to_string());
        self
    }
}

#[derive(Debug, Default)]
pub(crate) struct FaultPlan {
    pub faults: Vec<Fault>,
    pub latency: Duration,
}

impl FaultPlan {
    /// The fault that hits a request to `path`, if any; counted faults are used up.
    pub fn take(&mut self, path: &str) -> Option<FaultKind> {
        let index = self.faults.iter().position(|f| {
            f.path_prefix.as_deref().is_none_or(|p| path.starts_with(p))
                && match f.count {
                    FaultCount::Next(n) => n > 0,
                    FaultCount::Share(share) => fastrand::f64() < share,
                }
        })?;
        let fault = &mut self.faults[index];
        let kind = fault.kind.clone();
        if let FaultCount::Next(n) = &mut fault.count {
            *n -= 1;
            if *n == 0 {
                self.faults.remove(index);
            }
        }
        Some(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_faults_are_used_up_and_scoped() {
        let mut plan = FaultPlan::default();
        plan.faults
            .push(Fault::next(2, FaultKind::Status(503)).on_paths("/dns/"));
        assert_eq!(plan.take("/iam/auth/jwt/login"), None);
        assert_eq!(plan.take("/dns/v2/zones"), Some(FaultKind::Status(503)));
        assert_eq!(plan.take("/dns/v2/zones"), Some(FaultKind::Status(503)));
        assert_eq!(plan.take("/dns/v2/zones"), None);
        plan.faults.push(Fault::share(1.0, FaultKind::Malformed));
        assert_eq!(plan.take("/x"), Some(FaultKind::Malformed));
        assert_eq!(plan.take("/x"), Some(FaultKind::Malformed));
    }
}
