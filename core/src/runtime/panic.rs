//! A task's panic, caught at the task's edge and reported as what it is: a bug at a place in
//! the code, with its message and location — not a connector error to retry.
//!
//! The location is known only to the panic hook, which runs on the panicking thread just
//! before the unwind reaches [`catch`]: the hook leaves it in a thread-local that `catch`
//! reads on the same thread. The hook this module installs (once per process) calls the one
//! it replaces first, so the usual `thread '…' panicked at …` line still reaches stderr.

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Once;

use futures::FutureExt;

use crate::error::{Error, Result};

thread_local! {
    static LAST_LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Installs the location-recording hook (once per process; later calls do nothing).
pub(crate) fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let location = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
            LAST_LOCATION.with(|last| *last.borrow_mut() = location);
            previous(info);
        }));
    });
}

/// Runs `fut`; a panic inside it becomes [`Error::Panic`] with its message and location.
pub(crate) async fn catch<F>(fut: F) -> Result<()>
where
    F: Future<Output = Result<()>>,
{
    LAST_LOCATION.with(|last| last.borrow_mut().take());
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => Err(Error::Panic {
            message: message(payload.as_ref()),
            location: LAST_LOCATION.with(|last| last.borrow_mut().take()),
        }),
    }
}

/// The text a panic was raised with (`panic!("…")` gives a `&str` or a `String`).
fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_an_error_with_its_message_and_location() {
        install_hook();
        let line = line!() + 2;
        let err = catch(async {
            panic!("bad index {}", 7);
        })
        .await
        .unwrap_err();
        match &err {
            Error::Panic { message, location } => {
                assert_eq!(message, "bad index 7");
                let location = location.as_deref().expect("a location");
                assert!(
                    location.starts_with(&format!("core/src/runtime/panic.rs:{line}:")),
                    "{location}"
                );
            }
            other => panic!("expected a panic error, got {other:?}"),
        }
        assert!(
            !err.is_retryable(),
            "a panic is a bug, not a failure to retry"
        );
        assert!(
            err.to_string()
                .contains("panicked at core/src/runtime/panic.rs"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn results_pass_through() {
        assert!(catch(async { Ok(()) }).await.is_ok());
        let err = catch(async { Err(Error::Closed("x")) }).await.unwrap_err();
        assert!(matches!(err, Error::Closed("x")));
    }
}
