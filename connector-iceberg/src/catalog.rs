//! The catalog the table is in: the SQL catalog (the JDBC catalog's tables, which Java's
//! `JdbcCatalog`, pyiceberg's `SqlCatalog` and iceberg-rust share) on PostgreSQL, MySQL or
//! SQLite. Its files are read and written through the table's [`Store`](crate::storage).

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::{Catalog, CatalogBuilder, TableIdent};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};

use rivus_connector_files::Location;
use rivus_core::secrets::redact_url;
use rivus_core::{Error, Result};

use crate::error::iceberg_error;
use crate::storage::{Factory, Store};

/// Where the table's catalog is.
#[derive(Clone)]
pub struct CatalogOptions {
    /// The database holding the catalog's tables (`postgres://…`, `mysql://…`,
    /// `sqlite://…`); its password is never shown.
    pub uri: String,
    /// The catalog's name (the `catalog_name` of its rows; default `rivus`).
    pub name: String,
    /// Where new tables go: `s3://bucket/prefix` or `file:///dir` (a table is created at
    /// `<warehouse>/<namespace>/<table>`). Existing tables' files are where their metadata
    /// says, in the same bucket.
    pub warehouse: String,
}

impl std::fmt::Debug for CatalogOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogOptions")
            .field("uri", &redact_url(&self.uri))
            .field("name", &self.name)
            .field("warehouse", &self.warehouse)
            .finish()
    }
}

impl CatalogOptions {
    /// The SQL catalog in the database at `uri`, new tables under `warehouse`.
    pub fn sql(uri: impl Into<String>, warehouse: impl Into<String>) -> CatalogOptions {
        CatalogOptions {
            uri: uri.into(),
            name: "rivus".into(),
            warehouse: warehouse.into(),
        }
    }

    /// The warehouse as a location (refused with the option's name when it is not one).
    pub(crate) fn warehouse(&self) -> Result<Location> {
        Location::parse(&self.warehouse, "catalog.warehouse")
    }

    /// Options out of range, refused with their names.
    pub(crate) fn check(&self) -> Result<()> {
        if ![
            "postgres://",
            "postgresql://",
            "mysql://",
            "mariadb://",
            "sqlite:",
        ]
        .iter()
        .any(|s| self.uri.starts_with(s))
        {
            return Err(Error::config(
                "catalog.uri",
                format!(
                    "`{}` is not a postgres://, mysql:// or sqlite: URL",
                    redact_url(&self.uri)
                ),
            ));
        }
        if self.name.trim().is_empty() {
            return Err(Error::config("catalog.name", "empty"));
        }
        self.warehouse().map(|_| ())
    }

    /// Connects to the catalog; the table's files go through `store`.
    pub(crate) async fn connect(&self, store: Store) -> Result<Arc<dyn Catalog>> {
        let style = if self.uri.starts_with("postgres") {
            SqlBindStyle::DollarNumeric
        } else {
            SqlBindStyle::QMark
        };
        let catalog = SqlCatalogBuilder::default()
            .uri(&self.uri)
            .warehouse_location(self.warehouse.trim_end_matches('/'))
            .sql_bind_style(style)
            .with_storage_factory(Arc::new(Factory(store)))
            .load(&self.name, HashMap::new())
            .await
            .map_err(|e| {
                iceberg_error(
                    format!(
                        "iceberg: connecting to the catalog at {}",
                        redact_url(&self.uri)
                    ),
                    e,
                )
            })?;
        Ok(Arc::new(catalog))
    }
}

/// `namespace.table` (namespaces may nest: `a.b.table`) as a table identifier.
pub(crate) fn table_ident(name: &str) -> Result<TableIdent> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.trim().is_empty()) {
        return Err(Error::config(
            "table",
            format!("`{name}` is not `namespace.table`"),
        ));
    }
    TableIdent::from_strs(parts).map_err(|e| Error::config("table", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_uris_are_checked_by_path() {
        assert!(table_ident("lake.orders").is_ok());
        assert!(table_ident("a.b.orders").is_ok());
        for bad in ["orders", "lake.", ".orders", "a..b"] {
            let e = table_ident(bad).unwrap_err().to_string();
            assert!(e.contains("table"), "{e}");
        }
        let mut c = CatalogOptions::sql("postgres://u:hunter2@h/db", "s3://lake/wh");
        assert!(c.check().is_ok());
        c.uri = "http://u:hunter2@h/db".into();
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("catalog.uri") && !e.contains("hunter2"), "{e}");
        assert!(!format!("{c:?}").contains("hunter2"));
        c.uri = "sqlite::memory:".into();
        c.warehouse = "ftp://x".into();
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("catalog.warehouse"), "{e}");
    }
}
