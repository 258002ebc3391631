//! What the budget asks for at a given active time: warnings and exhaustion.
//! Pure, so the server's timer and the tests share one rule.

/// Warnings are announced when this many seconds are left.
pub const WARNING_THRESHOLDS_S: [u64; 3] = [3600, 15 * 60, 5 * 60];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetDue {
    Warning { threshold_s: u64, remaining_s: u64 },
    Exhausted,
}

/// What is due now. A threshold is announced once, and only when the budget
/// was ever larger than it (a 10-minute session gets no "1 hour left").
pub fn due(budget_ms: u64, active_ms: u64, warned_s: &[u64]) -> Option<BudgetDue> {
    let remaining_ms = budget_ms.saturating_sub(active_ms);
    if remaining_ms == 0 {
        return Some(BudgetDue::Exhausted);
    }
    WARNING_THRESHOLDS_S
        .iter()
        .rev() // smallest first: after a long outage only the most urgent is said
        .find(|&&t| remaining_ms <= t * 1000 && budget_ms > t * 1000 && !warned_s.contains(&t))
        .map(|&threshold_s| BudgetDue::Warning {
            threshold_s,
            remaining_s: remaining_ms.div_ceil(1000),
        })
}

/// Active milliseconds from `active_ms` until the next thing is due
/// (a warning or exhaustion); 0 when something is due now.
pub fn ms_until_due(budget_ms: u64, active_ms: u64, warned_s: &[u64]) -> u64 {
    if due(budget_ms, active_ms, warned_s).is_some() {
        return 0;
    }
    let remaining_ms = budget_ms.saturating_sub(active_ms);
    WARNING_THRESHOLDS_S
        .iter()
        .filter(|&&t| budget_ms > t * 1000 && !warned_s.contains(&t) && remaining_ms > t * 1000)
        .map(|&t| remaining_ms - t * 1000)
        .chain(std::iter::once(remaining_ms))
        .min()
        .unwrap_or(remaining_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3_600_000;
    const M: u64 = 60_000;

    #[test]
    fn warnings_come_once_each_then_exhaustion() {
        let budget = 2 * H;
        assert_eq!(due(budget, 0, &[]), None);
        assert_eq!(due(budget, H - 1, &[]), None);
        assert_eq!(
            due(budget, H, &[]),
            Some(BudgetDue::Warning {
                threshold_s: 3600,
                remaining_s: 3600
            })
        );
        assert_eq!(due(budget, H + 10 * M, &[3600]), None);
        assert_eq!(
            due(budget, 2 * H - 15 * M, &[3600]),
            Some(BudgetDue::Warning {
                threshold_s: 900,
                remaining_s: 900
            })
        );
        assert_eq!(
            due(budget, 2 * H - 5 * M + 1, &[3600, 900]),
            Some(BudgetDue::Warning {
                threshold_s: 300,
                remaining_s: 300
            })
        );
        assert_eq!(due(budget, 2 * H - 1, &[3600, 900, 300]), None);
        assert_eq!(
            due(budget, 2 * H, &[3600, 900, 300]),
            Some(BudgetDue::Exhausted)
        );
        assert_eq!(due(budget, 3 * H, &[]), Some(BudgetDue::Exhausted));
    }

    #[test]
    fn short_budgets_skip_larger_thresholds() {
        let budget = 10 * M;
        assert_eq!(due(budget, 0, &[]), None);
        assert_eq!(
            due(budget, 5 * M, &[]),
            Some(BudgetDue::Warning {
                threshold_s: 300,
                remaining_s: 300
            })
        );
        assert_eq!(due(3000, 2000, &[]), None);
        assert_eq!(due(3000, 3000, &[]), Some(BudgetDue::Exhausted));
    }

    #[test]
    fn time_until_due_points_at_the_next_threshold() {
        assert_eq!(ms_until_due(2 * H, 0, &[]), H);
        assert_eq!(ms_until_due(2 * H, H, &[3600]), 45 * M);
        assert_eq!(ms_until_due(3000, 1000, &[]), 2000);
        assert_eq!(ms_until_due(3000, 3000, &[]), 0);
        assert_eq!(ms_until_due(2 * H, H, &[]), 0);
    }
}
