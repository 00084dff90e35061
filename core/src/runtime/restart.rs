//! Restart strategies: whether a failed job is started again from its newest completed
//! checkpoint, and after how long — exponential delay with jitter (the default with
//! checkpoints, as in Flink 2.x), fixed delay, failure rate, or none.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How a [`Supervisor`](super::Supervisor) restarts a job whose task failed with a retryable
/// error ([`Error::is_retryable`]).
#[derive(Debug, Clone, PartialEq)]
pub enum RestartStrategy {
    /// Never restart: the first failure ends the job (the default without checkpoints, since
    /// a restart would replay from the very beginning).
    None,
    /// Wait `delay` before each restart; give up after `max_attempts` restarts.
    FixedDelay {
        /// Wait before each restart.
        delay: Duration,
        /// Restarts allowed in all.
        max_attempts: u32,
    },
    /// Wait `initial`, then `multiplier` times longer after each failure, up to `max`, each
    /// wait varied by ± `jitter` (a fraction). A run that stayed up for `reset_after` starts
    /// the sequence again at `initial`. `max_attempts`: restarts allowed in a row (without a
    /// reset), `None` for unlimited.
    ExponentialDelay {
        /// First wait.
        initial: Duration,
        /// Longest wait.
        max: Duration,
        /// Growth of the wait per failure (at least 1).
        multiplier: f64,
        /// Random variation of each wait, as a fraction of it (0 to 1).
        jitter: f64,
        /// A run this long counts as stable: the next failure waits `initial` again.
        reset_after: Duration,
        /// Restarts allowed without a stable run between them (`None`: unlimited).
        max_attempts: Option<u32>,
    },
    /// Restart after `delay` unless more than `max_failures` failures fell within the last
    /// `interval`.
    FailureRate {
        /// Failures allowed within `interval`.
        max_failures: u32,
        /// The sliding window.
        interval: Duration,
        /// Wait before each restart.
        delay: Duration,
    },
}

impl RestartStrategy {
    /// Flink 2.x's default exponential delay: 1 s doubling by 1.5 up to 1 min, ± 10 %, reset
    /// after an hour up, unlimited attempts.
    pub fn exponential_delay() -> Self {
        RestartStrategy::ExponentialDelay {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            multiplier: 1.5,
            jitter: 0.1,
            reset_after: Duration::from_secs(3600),
            max_attempts: None,
        }
    }

    /// The default: [`exponential_delay`](Self::exponential_delay) with checkpoints, `None`
    /// without.
    pub fn default_for(checkpointing: bool) -> Self {
        if checkpointing {
            Self::exponential_delay()
        } else {
            RestartStrategy::None
        }
    }

    /// Refuses impossible settings, naming the field relative to the strategy
    /// (`max_delay`; the caller places it, [`Error::under`](crate::Error::under)).
    pub fn validate(&self) -> Result<()> {
        match self {
            RestartStrategy::None => Ok(()),
            RestartStrategy::FixedDelay { .. } => Ok(()),
            RestartStrategy::ExponentialDelay {
                initial,
                max,
                multiplier,
                jitter,
                ..
            } => {
                if initial.is_zero() {
                    return Err(Error::config("initial_delay", "must be positive"));
                }
                if max < initial {
                    return Err(Error::config(
                        "max_delay",
                        format!("{max:?} is shorter than initial_delay {initial:?}"),
                    ));
                }
                if !(multiplier.is_finite() && *multiplier >= 1.0) {
                    return Err(Error::config(
                        "multiplier",
                        format!("{multiplier} must be a number of at least 1"),
                    ));
                }
                if !(0.0..=1.0).contains(jitter) {
                    return Err(Error::config(
                        "jitter",
                        format!("{jitter} must be between 0 and 1"),
                    ));
                }
                Ok(())
            }
            RestartStrategy::FailureRate {
                max_failures,
                interval,
                ..
            } => {
                if *max_failures == 0 {
                    return Err(Error::config(
                        "max_failures",
                        "must be at least 1 (use strategy \"none\" to never restart)",
                    ));
                }
                if interval.is_zero() {
                    return Err(Error::config("interval", "must be positive"));
                }
                Ok(())
            }
        }
    }
}

/// Applies a [`RestartStrategy`] to the failures of one job.
#[derive(Debug)]
pub(crate) struct RestartTracker {
    strategy: RestartStrategy,
    /// Restarts so far (all of them).
    restarts: u32,
    /// Restarts since the last reset (exponential delay).
    in_a_row: u32,
    /// Failure times within the window (failure rate).
    recent: VecDeque<Instant>,
    seed: u64,
}

impl RestartTracker {
    pub(crate) fn new(strategy: RestartStrategy) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15)
            | 1;
        RestartTracker {
            strategy,
            restarts: 0,
            in_a_row: 0,
            recent: VecDeque::new(),
            seed,
        }
    }

    /// A failure at `now` after a run of `ran_for`: the wait before the next attempt, or
    /// `None` when the strategy gives up.
    pub(crate) fn on_failure(&mut self, now: Instant, ran_for: Duration) -> Option<Duration> {
        let delay = match &self.strategy {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay {
                delay,
                max_attempts,
            } => (self.restarts < *max_attempts).then_some(*delay),
            RestartStrategy::ExponentialDelay {
                initial,
                max,
                multiplier,
                jitter,
                reset_after,
                max_attempts,
            } => {
                if ran_for >= *reset_after {
                    self.in_a_row = 0;
                }
                if max_attempts.is_some_and(|m| self.in_a_row >= m) {
                    None
                } else {
                    let grown = initial.as_secs_f64() * multiplier.powi(self.in_a_row as i32);
                    let base = grown.min(max.as_secs_f64());
                    let spread = base * jitter * (2.0 * self.random() - 1.0);
                    Some(Duration::from_secs_f64((base + spread).max(0.0)))
                }
            }
            RestartStrategy::FailureRate {
                max_failures,
                interval,
                delay,
            } => {
                self.recent.push_back(now);
                while self
                    .recent
                    .front()
                    .is_some_and(|t| now.duration_since(*t) > *interval)
                {
                    self.recent.pop_front();
                }
                (self.recent.len() <= *max_failures as usize).then_some(*delay)
            }
        };
        if delay.is_some() {
            self.restarts += 1;
            self.in_a_row += 1;
        }
        delay
    }

    /// Uniform in [0, 1) (xorshift: jitter needs no better randomness).
    fn random(&mut self) -> f64 {
        let mut x = self.seed;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.seed = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn none_never_restarts() {
        let mut t = RestartTracker::new(RestartStrategy::None);
        assert_eq!(t.on_failure(Instant::now(), S), None);
    }

    #[test]
    fn fixed_delay_counts_attempts() {
        let mut t = RestartTracker::new(RestartStrategy::FixedDelay {
            delay: S,
            max_attempts: 2,
        });
        let now = Instant::now();
        assert_eq!(t.on_failure(now, S), Some(S));
        assert_eq!(t.on_failure(now, S), Some(S));
        assert_eq!(t.on_failure(now, S), None);
    }

    #[test]
    fn exponential_grows_caps_jitters_and_resets() {
        let mut t = RestartTracker::new(RestartStrategy::ExponentialDelay {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(1000),
            multiplier: 2.0,
            jitter: 0.1,
            reset_after: Duration::from_secs(60),
            max_attempts: Some(6),
        });
        let now = Instant::now();
        let waits: Vec<f64> = (0..6)
            .map(|_| t.on_failure(now, S).unwrap().as_secs_f64())
            .collect();
        for (w, base) in waits.iter().zip([0.1, 0.2, 0.4, 0.8, 1.0, 1.0]) {
            assert!(
                (w - base).abs() <= base * 0.1 + 1e-9,
                "wait {w} for base {base}"
            );
        }
        assert_eq!(t.on_failure(now, S), None, "six in a row is the limit");
        // A stable run resets the sequence (and the count in a row).
        let w = t.on_failure(now, Duration::from_secs(61)).unwrap();
        assert!(w <= Duration::from_millis(110), "{w:?}");
    }

    #[test]
    fn failure_rate_uses_a_sliding_window() {
        let mut t = RestartTracker::new(RestartStrategy::FailureRate {
            max_failures: 2,
            interval: Duration::from_secs(10),
            delay: S,
        });
        let t0 = Instant::now();
        assert_eq!(t.on_failure(t0, S), Some(S));
        assert_eq!(t.on_failure(t0 + Duration::from_secs(1), S), Some(S));
        assert_eq!(t.on_failure(t0 + Duration::from_secs(2), S), None);
        // Once the early failures leave the window, restarts are allowed again.
        let mut t = RestartTracker::new(RestartStrategy::FailureRate {
            max_failures: 2,
            interval: Duration::from_secs(10),
            delay: S,
        });
        t.on_failure(t0, S);
        t.on_failure(t0 + Duration::from_secs(1), S);
        assert_eq!(t.on_failure(t0 + Duration::from_secs(12), S), Some(S));
    }

    #[test]
    fn bad_settings_name_their_field() {
        let e = RestartStrategy::ExponentialDelay {
            initial: S,
            max: Duration::from_millis(10),
            multiplier: 2.0,
            jitter: 0.1,
            reset_after: S,
            max_attempts: None,
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("`max_delay`"), "{e}");
        let e = RestartStrategy::FailureRate {
            max_failures: 0,
            interval: S,
            delay: S,
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("`max_failures`"), "{e}");
    }
}
