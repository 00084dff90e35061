//! How sqlx's errors become rivus errors: with what was being done, the server's detail
//! (code, column, constraint) and no secret, and a [`Fault`]: refused credentials or
//! permissions ([`Error::Refused`]) and statements the database will refuse again (a missing
//! table or type, a syntax error: [`Error::Rejected`]) end the job; only lost connections,
//! timeouts and conflicts restart it.

use rivus_sdk::{Error, Fault};

use crate::dialect::Dialect;

/// True when the server refused the credentials or a permission (PostgreSQL class 28 and
/// 42501; MySQL/MariaDB 1044, 1045, 1142, 1143, 1227, 1698): a restart cannot fix it.
pub(crate) fn is_refusal(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = e else {
        return false;
    };
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return matches!(my.number(), 1044 | 1045 | 1142 | 1143 | 1227 | 1698);
    }
    let code = db.code().unwrap_or_default();
    code.starts_with("28") || code == "42501"
}

/// What a restart would make of `e`: refusals ([`is_refusal`]) are refused, what
/// [`classify`] calls retryable is transient, the rest permanent.
pub(crate) fn fault(e: &sqlx::Error) -> rivus_sdk::Fault {
    if is_refusal(e) {
        return Fault::Refused;
    }
    let dialect = match e {
        sqlx::Error::Database(db)
            if db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some() =>
        {
            Dialect::MySql
        }
        sqlx::Error::Database(db)
            if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() =>
        {
            Dialect::Sqlite
        }
        _ => Dialect::Postgres,
    };
    match classify(dialect, e) {
        Statement::Retry => Fault::Transient,
        Statement::Data | Statement::Fatal => Fault::Permanent,
    }
}

/// `e` as a rivus error with `context`, the server's detail and its [`fault`].
pub(crate) fn sql_error(context: impl Into<String>, e: &sqlx::Error) -> Error {
    Error::client(context, describe(e), fault(e))
}

/// `e` with the server's detail, column and constraint where it gives them.
pub(crate) fn describe(e: &sqlx::Error) -> String {
    let sqlx::Error::Database(db) = e else {
        return crate::redact(&e.to_string());
    };
    let mut text = db.message().to_owned();
    if let Some(code) = db.code() {
        text = format!("{text} [{code}]");
    }
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        if let Some(column) = pg.column() {
            text.push_str(&format!("; column `{column}`"));
        }
        if let Some(detail) = pg.detail() {
            text.push_str(&format!("; {detail}"));
        }
    }
    if let Some(c) = db.constraint() {
        text.push_str(&format!("; constraint `{c}`"));
    }
    text
}

/// The error of a statement that got no answer within `limit` (classified as retryable: the
/// connection is dropped and the write tried again on a new one).
pub(crate) fn timed_out(limit: std::time::Duration) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no answer from the database within {limit:?}"),
    ))
}

/// What to do about a failed statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statement {
    /// The connection or the server is (maybe briefly) unavailable: retry with backoff.
    Retry,
    /// The data was refused (constraint, type, range): isolate the bad rows.
    Data,
    /// Anything else (syntax, a missing table or type, permissions): the database will say
    /// the same again, so the job ends (`rivus_sdk::Fault::Permanent`).
    Fatal,
}

/// Classifies `e` from a statement run against `dialect`.
pub(crate) fn classify(dialect: Dialect, e: &sqlx::Error) -> Statement {
    let db = match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => return Statement::Retry,
        sqlx::Error::Encode(_) => return Statement::Data,
        sqlx::Error::Database(db) => db,
        _ => return Statement::Fatal,
    };
    match dialect {
        Dialect::Postgres => {
            let code = db.code().unwrap_or_default();
            if code.starts_with("22") || code.starts_with("23") {
                Statement::Data
            } else if rivus_sdk::Fault::of_sqlstate(&code) == rivus_sdk::Fault::Transient {
                Statement::Retry
            } else {
                Statement::Fatal
            }
        }
        Dialect::MySql => {
            let number = db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .map(|e| e.number())
                .unwrap_or(0);
            match number {
                // Too many connections, shutdown, network errors, lock wait timeout, deadlock,
                // interrupted, connection killed, execution time exceeded, gone away, lost,
                // idle disconnect.
                1040
                | 1053
                | 1158..=1161
                | 1205
                | 1213
                | 1317
                | 1927
                | 3024
                | 2006
                | 2013
                | 4031 => Statement::Retry,
                1048 | 1062 | 1264 | 1265 | 1292 | 1366 | 1406 | 1451 | 1452 | 3140 | 3819
                | 4025 => Statement::Data,
                _ => Statement::Fatal,
            }
        }
        Dialect::Sqlite => {
            let code: i64 = db.code().and_then(|c| c.parse().ok()).unwrap_or(0);
            match code & 0xff {
                5 | 6 => Statement::Retry,
                19 | 20 | 25 => Statement::Data,
                _ => Statement::Fatal,
            }
        }
    }
}
