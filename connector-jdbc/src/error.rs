//! How sqlx's errors become rivus errors: with what was being done, the server's detail
//! (code, column, constraint) and no secret, and a [`Fault`]: refused credentials or
//! permissions ([`Error::Refused`]) and statements the database will refuse again (a missing
//! table or type, a syntax error: [`Error::Rejected`]) end the job; only lost connections,
//! timeouts and conflicts restart it.

use rivus_core::{Error, Fault};

use crate::db::classify;
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
/// [`classify`](crate::db::classify) calls retryable is transient, the rest permanent.
pub(crate) fn fault(e: &sqlx::Error) -> Fault {
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
        crate::db::Fault::Retry => Fault::Transient,
        crate::db::Fault::Data | crate::db::Fault::Fatal => Fault::Permanent,
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
