//! Test helpers: the three databases (PostgreSQL and MariaDB from `dev/services`, SQLite in a
//! temporary file) and plain sqlx access to set up tables and read them back.
#![allow(dead_code)]

use rivus_sdk::tls::TlsFiles;
use rivus_testkit::services::{require, tls_dir, Service};
use sqlx::{Connection, Executor, Row};

/// One database under test: the URL and TLS files the connector is given.
#[derive(Debug, Clone)]
pub(crate) struct Db {
    pub name: &'static str,
    pub url: String,
    pub tls: TlsFiles,
}

/// PostgreSQL, MariaDB and SQLite (a file under a temporary directory kept for the test run).
pub(crate) fn databases() -> Vec<Db> {
    let mut out = Vec::new();
    if let Some(url) = require(Service::Postgres) {
        out.push(Db {
            name: "postgres",
            url,
            tls: TlsFiles::default(),
        });
    }
    if let Some(url) = require(Service::MySql) {
        out.push(Db {
            name: "mariadb",
            url,
            tls: TlsFiles::default(),
        });
    }
    out.push(sqlite());
    out
}

/// PostgreSQL and MariaDB, those that answer; a test looping over them fails when neither does
/// (unless skipping was asked for).
pub(crate) fn servers() -> Vec<Db> {
    rivus_testkit::services::require_any(
        "PostgreSQL and MariaDB",
        [postgres(), mariadb()].into_iter().flatten().collect(),
    )
}

pub(crate) fn postgres() -> Option<Db> {
    require(Service::Postgres).map(|url| Db {
        name: "postgres",
        url,
        tls: TlsFiles::default(),
    })
}

pub(crate) fn mariadb() -> Option<Db> {
    require(Service::MySql).map(|url| Db {
        name: "mariadb",
        url,
        tls: TlsFiles::default(),
    })
}

pub(crate) fn sqlite() -> Db {
    let dir = tempfile::tempdir().unwrap().keep();
    Db {
        name: "sqlite",
        url: format!("sqlite:{}", dir.join("test.db").display()),
        tls: TlsFiles::default(),
    }
}

/// PostgreSQL and MariaDB over TLS, as users the servers refuse without it: PostgreSQL through
/// the `tls` option (the URL without its query; the CA and the client certificate as files,
/// so `sslmode=verify-full` comes from the connector), MariaDB through the URL's own
/// `ssl-mode=VERIFY_IDENTITY` and `ssl-ca`.
pub(crate) fn tls_servers() -> Vec<Db> {
    let pg = require(Service::PostgresTls).map(|url| Db {
        name: "postgres",
        url: url.split('?').next().unwrap_or(&url).to_owned(),
        tls: TlsFiles {
            ca_file: Some(tls_dir().join("ca.crt")),
            client_cert: Some(tls_dir().join("client.crt")),
            client_key: Some(tls_dir().join("client.key")),
        },
    });
    let my = require(Service::MySqlTls).map(|url| Db {
        name: "mariadb",
        url,
        tls: TlsFiles::default(),
    });
    rivus_testkit::services::require_any(
        "PostgreSQL and MariaDB over TLS",
        [pg, my].into_iter().flatten().collect(),
    )
}

impl Db {
    pub(crate) fn is(&self, name: &str) -> bool {
        self.name == name
    }

    /// A fault proxy in front of this server, the URL through it, and the faults to try
    /// there (the server's restart among them).
    #[allow(dead_code)] // the fault tests use it
    pub(crate) async fn under_faults(
        &self,
    ) -> (
        rivus_testkit::fault_proxy::FaultProxy,
        String,
        Vec<rivus_testkit::faults::Fault>,
    ) {
        use rivus_testkit::faults::Fault;
        let (proxy, url) = rivus_testkit::fault_proxy::FaultProxy::in_front_of(&self.url)
            .await
            .unwrap();
        (
            proxy,
            url,
            Fault::table(Fault::blackhole_from_env(), self.name),
        )
    }

    /// The URL with the TLS files as the driver's parameters, for the test's own connections.
    pub(crate) fn conn_url(&self) -> String {
        rivus_connector_jdbc::config::url_with_tls(&self.url, &self.tls).unwrap()
    }

    /// Runs statements (separated by `;`).
    pub(crate) async fn exec(&self, sql: &str) {
        match self.name {
            "postgres" => {
                let mut c = sqlx::PgConnection::connect(&self.conn_url()).await.unwrap();
                c.execute(sqlx::raw_sql(sql)).await.unwrap();
            }
            "mariadb" => {
                let mut c = sqlx::MySqlConnection::connect(&self.conn_url())
                    .await
                    .unwrap();
                c.execute(sqlx::raw_sql(sql)).await.unwrap();
            }
            _ => {
                let opts: sqlx::sqlite::SqliteConnectOptions = self
                    .url
                    .parse::<sqlx::sqlite::SqliteConnectOptions>()
                    .unwrap()
                    .create_if_missing(true);
                let mut c = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
                c.execute(sqlx::raw_sql(sql)).await.unwrap();
            }
        }
    }

    /// The first column of every row of `sql`, as text (NULL as `NULL`).
    pub(crate) async fn strings(&self, sql: &str) -> Vec<String> {
        fn text<R: Row>(r: &R) -> String
        where
            for<'a> Option<String>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
            usize: sqlx::ColumnIndex<R>,
        {
            r.get::<Option<String>, _>(0)
                .unwrap_or_else(|| "NULL".into())
        }
        match self.name {
            "postgres" => {
                let mut c = sqlx::PgConnection::connect(&self.conn_url()).await.unwrap();
                c.fetch_all(sql).await.unwrap().iter().map(text).collect()
            }
            "mariadb" => {
                let mut c = sqlx::MySqlConnection::connect(&self.conn_url())
                    .await
                    .unwrap();
                c.fetch_all(sql).await.unwrap().iter().map(text).collect()
            }
            _ => {
                let mut c = sqlx::SqliteConnection::connect(&self.conn_url())
                    .await
                    .unwrap();
                c.fetch_all(sql).await.unwrap().iter().map(text).collect()
            }
        }
    }

    /// MariaDB: the ids of the prepared XA transactions.
    pub(crate) async fn xa_ids(&self) -> Vec<String> {
        let mut c = sqlx::MySqlConnection::connect(&self.conn_url())
            .await
            .unwrap();
        let rows = c.fetch_all(sqlx::raw_sql("XA RECOVER")).await.unwrap();
        rows.iter()
            .map(|r| String::from_utf8(r.get::<Vec<u8>, _>("data")).unwrap())
            .collect()
    }

    /// `SELECT COUNT(*)` as a number.
    pub(crate) async fn count(&self, table: &str) -> usize {
        let v = self
            .strings(&format!("SELECT CAST(COUNT(*) AS CHAR(20)) FROM {table}"))
            .await;
        v[0].trim().parse().unwrap()
    }

    /// The auto-increment primary-key column type.
    pub(crate) fn serial(&self) -> &'static str {
        match self.name {
            "postgres" => "BIGSERIAL PRIMARY KEY",
            "mariadb" => "BIGINT AUTO_INCREMENT PRIMARY KEY",
            _ => "INTEGER PRIMARY KEY AUTOINCREMENT",
        }
    }
}
