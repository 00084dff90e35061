//! Backoff policies for retrying failed requests and reconnecting: none, constant, exponential.
//! The one copy used by the BulkProcessor and by every connector.

use std::future::Future;
use std::time::Duration;

/// How long to wait between attempts, and how many retries to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackoffPolicy {
    /// Never retry.
    None,
    /// Wait the same `delay` before each of at most `max_retries` retries.
    Constant {
        /// Wait before each retry.
        delay: Duration,
        /// Retries after the first attempt.
        max_retries: u32,
    },
    /// Double the wait after each retry, starting at `initial`, capped at `max_delay`.
    Exponential {
        /// Wait before the first retry.
        initial: Duration,
        /// Upper bound of a single wait.
        max_delay: Duration,
        /// Retries after the first attempt.
        max_retries: u32,
    },
}

impl Default for BackoffPolicy {
    /// Exponential from 50 ms, capped at 5 s, 8 retries (about 15 s in all).
    fn default() -> Self {
        BackoffPolicy::Exponential {
            initial: Duration::from_millis(50),
            max_delay: Duration::from_secs(5),
            max_retries: 8,
        }
    }
}

impl BackoffPolicy {
    /// The connectors' default for reconnecting to a broker or server after a lost
    /// connection: exponential from 100 ms, capped at 5 s, 60 attempts (about 5 minutes).
    pub fn reconnect() -> Self {
        BackoffPolicy::Exponential {
            initial: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            max_retries: 60,
        }
    }

    /// The number of retries this policy allows after the first attempt.
    pub fn max_retries(&self) -> u32 {
        match self {
            BackoffPolicy::None => 0,
            BackoffPolicy::Constant { max_retries, .. }
            | BackoffPolicy::Exponential { max_retries, .. } => *max_retries,
        }
    }

    /// The wait before retry number `retry` (1-based), or `None` when retries are exhausted.
    pub fn delay(&self, retry: u32) -> Option<Duration> {
        if retry == 0 || retry > self.max_retries() {
            return None;
        }
        match self {
            BackoffPolicy::None => None,
            BackoffPolicy::Constant { delay, .. } => Some(*delay),
            BackoffPolicy::Exponential {
                initial, max_delay, ..
            } => {
                let factor = 1u32.checked_shl(retry - 1).unwrap_or(u32::MAX);
                Some(initial.saturating_mul(factor).min(*max_delay))
            }
        }
    }

    /// An iterator over the successive waits.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + '_ {
        (1..).map_while(move |n| self.delay(n))
    }
}

/// Runs `op` until it succeeds, the error is not retryable, or the policy is exhausted.
///
/// Returns the last error when giving up. `on_retry` is told the retry number, the wait and the
/// error before each wait (for logs and metrics).
pub async fn retry<T, E, F, Fut>(
    policy: &BackoffPolicy,
    mut op: F,
    is_retryable: impl Fn(&E) -> bool,
    mut on_retry: impl FnMut(u32, Duration, &E),
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                attempt += 1;
                match policy.delay(attempt) {
                    Some(wait) if is_retryable(&e) => {
                        on_retry(attempt, wait, &e);
                        tokio::time::sleep(wait).await;
                    }
                    _ => return Err(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_doubles_and_caps() {
        let p = BackoffPolicy::Exponential {
            initial: Duration::from_millis(10),
            max_delay: Duration::from_millis(50),
            max_retries: 5,
        };
        let d: Vec<u128> = p.delays().map(|d| d.as_millis()).collect();
        assert_eq!(d, vec![10, 20, 40, 50, 50]);
        assert_eq!(p.delay(6), None);
    }

    #[test]
    fn constant_and_none() {
        let c = BackoffPolicy::Constant {
            delay: Duration::from_millis(7),
            max_retries: 2,
        };
        assert_eq!(c.delays().count(), 2);
        assert_eq!(BackoffPolicy::None.delays().count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_gives_up_after_policy() {
        let p = BackoffPolicy::Constant {
            delay: Duration::from_millis(100),
            max_retries: 3,
        };
        let mut calls = 0;
        let mut retries = Vec::new();
        let r: Result<(), &str> = retry(
            &p,
            || {
                calls += 1;
                async { Err("boom") }
            },
            |_| true,
            |n, _, _| retries.push(n),
        )
        .await;
        assert_eq!(r, Err("boom"));
        assert_eq!(calls, 4);
        assert_eq!(retries, vec![1, 2, 3]);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_stops_on_permanent_error() {
        let mut calls = 0;
        let r: Result<(), &str> = retry(
            &BackoffPolicy::default(),
            || {
                calls += 1;
                async { Err("permanent") }
            },
            |e| *e != "permanent",
            |_, _, _| {},
        )
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}
