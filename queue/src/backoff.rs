use std::time::Duration;

use rand::Rng;

/// Exponential backoff with jitter: `base · 2^(attempt-1)`, capped, then
/// spread over ±20% so that jobs failing together do not retry together.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The delay after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(30);
        let nominal = self.base.saturating_mul(1u32 << exponent).min(self.max);
        let jitter = rand::thread_rng().gen_range(0.8..=1.2);
        nominal.mul_f64(jitter).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_attempt_within_jitter_and_stops_at_the_cap() {
        let b = Backoff {
            base: Duration::from_secs(10),
            max: Duration::from_secs(300),
        };
        for (attempt, nominal) in [(1, 10.0), (2, 20.0), (3, 40.0), (4, 80.0)] {
            let d = b.delay(attempt).as_secs_f64();
            assert!(
                (nominal * 0.8..=nominal * 1.2).contains(&d),
                "attempt {attempt}: {d}s"
            );
        }
        assert!(b.delay(40).as_secs_f64() <= 300.0);
        assert!(b.delay(40).as_secs_f64() >= 240.0);
    }
}
