//! The catalog the table is in, by its URI's scheme: an Iceberg REST catalog (`http://`,
//! `https://`: Nessie, Polaris, Lakekeeper, Gravitino, Unity, AWS Glue's and S3 Tables' REST
//! endpoints), or the SQL catalog (the JDBC catalog's tables, which Java's `JdbcCatalog`,
//! pyiceberg's `SqlCatalog` and iceberg-rust share) on PostgreSQL, MySQL or SQLite. Its files
//! are read and written through the sink's [`Store`](crate::storage).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use iceberg::{Catalog, CatalogBuilder, TableIdent};
use iceberg_catalog_rest::{
    RestCatalogBuilder, REST_CATALOG_PROP_URI, REST_CATALOG_PROP_WAREHOUSE,
};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};

use rivus_connector_files::Location;
use rivus_sdk::secrets::redact_url;
use rivus_sdk::{Error, Result};

use crate::error::iceberg_error;
use crate::storage::{Factory, Store};

/// Where the table's catalog is.
#[derive(Clone)]
pub struct CatalogOptions {
    /// The REST catalog's base URL (`http://127.0.0.1:19120/iceberg`), or the database
    /// holding the SQL catalog's tables (`postgres://…`, `mysql://…`, `sqlite://…`); its
    /// password is never shown.
    pub uri: String,
    /// The catalog's name (the SQL catalog's `catalog_name` of its rows; default `rivus`).
    pub name: String,
    /// Where new tables go: `s3://bucket/prefix` or `file:///dir` (the SQL catalog creates a
    /// table at `<warehouse>/<namespace>/<table>`; a REST catalog takes it as its `warehouse`
    /// and places tables itself). Existing tables' files are where their metadata says.
    pub warehouse: String,
    /// More properties of a REST catalog, as iceberg's REST client takes them: `token` (a
    /// bearer token), `credential` (`client_id:client_secret`, exchanged for a token by
    /// OAuth2), `scope`, `oauth2-server-uri`, `header.<name>`; their values are never shown.
    pub properties: BTreeMap<String, String>,
}

impl std::fmt::Debug for CatalogOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogOptions")
            .field("uri", &redact_url(&self.uri))
            .field("name", &self.name)
            .field("warehouse", &self.warehouse)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl CatalogOptions {
    /// Whether the catalog is a REST catalog (its URI is `http://` or `https://`).
    pub fn is_rest(&self) -> bool {
        self.uri.starts_with("http://") || self.uri.starts_with("https://")
    }

    /// The catalog at `uri` — a REST catalog's `http(s)://` base URL, or the SQL catalog's
    /// database — new tables under `warehouse`.
    pub fn new(uri: impl Into<String>, warehouse: impl Into<String>) -> CatalogOptions {
        CatalogOptions {
            uri: uri.into(),
            name: "rivus".into(),
            properties: BTreeMap::new(),
            warehouse: warehouse.into(),
        }
    }

    /// The warehouse as a location (refused with the option's name when it is not one).
    pub(crate) fn warehouse(&self) -> Result<Location> {
        Location::parse(&self.warehouse, "catalog.warehouse")
    }

    /// Options out of range, refused with their names.
    pub(crate) fn check(&self) -> Result<()> {
        if !self.is_rest()
            && ![
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
                    "`{}` is not a REST catalog's http(s):// URL, nor a postgres://, mysql:// \
                     or sqlite: URL",
                    redact_url(&self.uri)
                ),
            ));
        }
        if !self.properties.is_empty() && !self.is_rest() {
            return Err(Error::config(
                "catalog.properties",
                "properties are for a REST catalog (an http(s):// `uri`)",
            ));
        }
        if self.name.trim().is_empty() {
            return Err(Error::config("catalog.name", "empty"));
        }
        self.warehouse().map(|_| ())
    }

    /// Connects to the catalog; the table's files go through `store`.
    pub(crate) async fn connect(&self, store: Store) -> Result<Arc<dyn Catalog>> {
        let failed = |e| {
            iceberg_error(
                format!(
                    "iceberg: connecting to the catalog at {}",
                    redact_url(&self.uri)
                ),
                e,
            )
        };
        if self.is_rest() {
            let mut props: HashMap<String, String> = self.properties.clone().into_iter().collect();
            props.insert(REST_CATALOG_PROP_URI.to_owned(), self.uri.clone());
            props.insert(
                REST_CATALOG_PROP_WAREHOUSE.to_owned(),
                self.warehouse.clone(),
            );
            let catalog = RestCatalogBuilder::default()
                .with_storage_factory(Arc::new(Factory(store)))
                .load(&self.name, props)
                .await
                .map_err(failed)?;
            return Ok(Arc::new(catalog));
        }
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
            .map_err(failed)?;
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
        let mut c = CatalogOptions::new("postgres://u:hunter2@h/db", "s3://lake/wh");
        assert!(c.check().is_ok());
        c.uri = "ftp://u:hunter2@h/db".into();
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("catalog.uri") && !e.contains("hunter2"), "{e}");
        assert!(!format!("{c:?}").contains("hunter2"));
        c.uri = "postgres://u@h/db".into();
        c.properties.insert("token".into(), "hunter2".into());
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("catalog.properties"), "{e}");
        c.uri = "https://catalog.example/iceberg".into();
        assert!(c.check().is_ok());
        assert!(!format!("{c:?}").contains("hunter2"), "{c:?}");
        c.uri = "sqlite::memory:".into();
        c.properties.clear();
        c.warehouse = "ftp://x".into();
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("catalog.warehouse"), "{e}");
    }
}
