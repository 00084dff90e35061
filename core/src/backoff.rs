//! Backoff policies for retrying failed requests and reconnecting: none, constant, exponential.
//! The one copy used by the BulkProcessor and by every connector, with [`Attempts`], the
//! counter of one retry or reconnect loop.

use std::time::Duration;

use crate::{Error, Result};

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

/// The attempts of one retry or reconnect loop under a [`BackoffPolicy`]: counts them, decides
/// after each failure whether to try again and how long to wait, and logs it.
///
/// A failure that no retry can fix ([`Error::is_retryable`] is false: refused credentials, bad
/// configuration) ends the loop at once; so does a spent policy. Inside a source, wait with
/// [`SourceContext::backoff`](crate::SourceContext::backoff), which keeps serving checkpoints
/// and stop requests meanwhile; elsewhere with [`Attempts::wait`].
///
/// ```
/// use rivus_sdk::backoff::{Attempts, BackoffPolicy};
/// # async fn connect() -> rivus_sdk::Result<()> { Ok(()) }
/// # async fn demo() -> rivus_sdk::Result<()> {
/// let mut attempts = Attempts::new("my sink: reconnect", &BackoffPolicy::reconnect());
/// let conn = loop {
///     match connect().await {
///         Ok(c) => break c,
///         Err(e) => attempts.wait(e).await?, // gives the error back when giving up
///     }
/// };
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Attempts {
    policy: BackoffPolicy,
    what: &'static str,
    failed: u32,
}

impl Attempts {
    /// A loop named `what` (for logs) under `policy`; no attempt failed yet.
    pub fn new(what: &'static str, policy: &BackoffPolicy) -> Self {
        Attempts {
            policy: policy.clone(),
            what,
            failed: 0,
        }
    }

    /// How many attempts have failed so far.
    pub fn failed(&self) -> u32 {
        self.failed
    }

    /// Counts a failure without an error of its own: the wait before the next attempt, or
    /// `None` when the policy is spent.
    pub fn next_delay(&mut self) -> Option<Duration> {
        self.failed += 1;
        self.policy.delay(self.failed)
    }

    /// Counts the failure `err`: the wait before the next attempt, or `err` back when giving
    /// up (the policy is spent, or `err` is not retryable).
    pub fn after(&mut self, err: Error) -> Result<Duration> {
        if !err.is_retryable() {
            tracing::warn!(what = self.what, error = %err, "not retrying: no retry can fix this");
            return Err(err);
        }
        match self.next_delay() {
            Some(wait) => {
                tracing::debug!(what = self.what, attempt = self.failed, ?wait, error = %err,
                    "attempt failed, retrying");
                Ok(wait)
            }
            None => {
                tracing::warn!(what = self.what, attempts = self.failed, error = %err,
                    "giving up: every attempt failed");
                Err(err)
            }
        }
    }

    /// Counts the failure `err` and sleeps before the next attempt; `err` back when giving up.
    pub async fn wait(&mut self, err: Error) -> Result<()> {
        let wait = self.after(err)?;
        tokio::time::sleep(wait).await;
        Ok(())
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
    async fn attempts_give_up_after_the_policy() {
        let p = BackoffPolicy::Constant {
            delay: Duration::from_millis(100),
            max_retries: 3,
        };
        let mut attempts = Attempts::new("test", &p);
        let started = tokio::time::Instant::now();
        for _ in 0..3 {
            attempts.wait(Error::connector("x", "lost")).await.unwrap();
        }
        assert_eq!(started.elapsed(), Duration::from_millis(300));
        let e = attempts.wait(Error::connector("x", "lost again")).await;
        assert!(e.unwrap_err().to_string().contains("lost again"));
        assert_eq!(attempts.failed(), 4);
    }

    #[test]
    fn attempts_stop_at_an_error_no_retry_can_fix() {
        let mut attempts = Attempts::new("test", &BackoffPolicy::reconnect());
        let refused = Error::refused("x", "wrong password");
        assert!(matches!(
            attempts.after(refused),
            Err(Error::Refused { .. })
        ));
        let d = attempts.after(Error::connector("x", "lost")).unwrap();
        assert_eq!(d, Duration::from_millis(100));
    }
}
