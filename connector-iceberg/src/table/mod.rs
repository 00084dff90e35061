//! [`IcebergTable`]: an Iceberg table kept over the files sink's files. At open it loads the
//! table from its catalog (or creates it) and hands the sink the table's columns with their
//! field ids, its data directory and its partition layout; when files become visible it
//! appends them, with the other subtasks' waiting then, in one snapshot (`commit.rs`),
//! recording each writer's sequence in the table's properties in the same commit — which is how a restore finds what
//! was committed before and never commits it twice. Columns the records bring are added by
//! `evolve.rs`; files no snapshot names are listed by `orphans.rs`.

use std::sync::Arc;

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::{Catalog, NamespaceIdent, TableCreation, TableIdent};

use rivus_connector_files::{Column, Layout, Location, Publish, Recoverable, S3Options};
use rivus_sdk::prelude::RuntimeContext;
use rivus_sdk::{Error, Result};

use crate::catalog::CatalogOptions;
use crate::columns::{columns_of, json_value, schema_of, JSON_COLUMNS};
use crate::error::iceberg_error;
use crate::partition::{self, PartitionBy, Partitioning};
use crate::storage::Store;

mod commit;
mod evolve;
mod orphans;

/// One Iceberg table, shared by the subtasks of a sink.
pub(crate) struct IcebergTable {
    catalog_options: CatalogOptions,
    s3: S3Options,
    ident: TableIdent,
    /// `Some`: created when missing, partitioned so.
    create: Option<PartitionBy>,
    /// The table as last loaded or committed.
    table: parking_lot::Mutex<Option<Table>>,
    /// The job's name and the sink's, recorded in each snapshot's summary and naming the
    /// property of each writer's last sequence.
    job: parking_lot::Mutex<(String, String)>,
    /// The table's data directory, read at open.
    data: parking_lot::Mutex<Option<Location>>,
    /// The table's partition spec, read at open (`None`: unpartitioned).
    partitioning: parking_lot::Mutex<Option<Arc<Partitioning>>>,
    /// What every sink instance of this process writing the table shares: the catalog,
    /// connected at the first subtask's open, and the group commits (`commit.rs`).
    group: Arc<commit::Group>,
}

impl std::fmt::Debug for IcebergTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcebergTable")
            .field("table", &self.ident.to_string())
            .field("catalog", &self.catalog_options)
            .finish()
    }
}

impl IcebergTable {
    /// The table `ident` of the catalog; `create`: created from the declared columns when
    /// missing, partitioned so.
    pub(crate) fn new(
        catalog: CatalogOptions,
        s3: S3Options,
        ident: TableIdent,
        create: Option<PartitionBy>,
    ) -> IcebergTable {
        let group = commit::Group::of(&format!("{} {}", catalog.uri, catalog.name), &ident);
        IcebergTable {
            catalog_options: catalog,
            s3,
            ident,
            create,
            table: parking_lot::Mutex::new(None),
            job: parking_lot::Mutex::new(Default::default()),
            data: parking_lot::Mutex::new(None),
            partitioning: parking_lot::Mutex::new(None),
            group,
        }
    }

    /// The catalog, connected once.
    async fn catalog(&self) -> Result<Arc<dyn Catalog>> {
        Ok(Arc::clone(&self.connected().await?.0))
    }

    /// The store of the table's files.
    async fn store(&self) -> Result<Store> {
        Ok(self.connected().await?.1.clone())
    }

    async fn connected(&self) -> Result<&(Arc<dyn Catalog>, Store)> {
        self.group
            .catalog
            .get_or_try_init(|| async {
                let store = Store::new(&self.s3);
                let catalog = self.catalog_options.connect(store.clone()).await?;
                Ok((catalog, store))
            })
            .await
    }

    /// The table as it is now in the catalog.
    async fn load(&self) -> Result<Table> {
        let catalog = self.catalog().await?;
        let table = catalog
            .load_table(&self.ident)
            .await
            .map_err(|e| iceberg_error(format!("iceberg: loading the table {}", self.ident), e))?;
        *self.table.lock() = Some(table.clone());
        Ok(table)
    }

    async fn exists(&self) -> Result<bool> {
        self.catalog()
            .await?
            .table_exists(&self.ident)
            .await
            .map_err(|e| iceberg_error(format!("iceberg: looking up the table {}", self.ident), e))
    }

    /// Creates the table (and its namespace) with `columns`, partitioned by `by`; another
    /// subtask or writer creating it at the same time wins as well.
    async fn create(&self, columns: &[Column], by: &PartitionBy) -> Result<()> {
        let catalog = self.catalog().await?;
        let namespace: &NamespaceIdent = self.ident.namespace();
        let what = |e| iceberg_error(format!("iceberg: creating the table {}", self.ident), e);
        if !catalog.namespace_exists(namespace).await.map_err(what)? {
            if let Err(e) = catalog
                .create_namespace(namespace, Default::default())
                .await
            {
                if !catalog.namespace_exists(namespace).await.map_err(what)? {
                    return Err(what(e));
                }
            }
        }
        let schema = schema_of(columns)?;
        let spec = if by.is_empty() {
            None
        } else {
            Some(by.spec(&schema)?.into_unbound())
        };
        let json: Vec<&str> = columns
            .iter()
            .filter(|c| c.ty == rivus_connector_files::ColumnType::Json)
            .map(|c| c.name.as_str())
            .collect();
        let mut creation = TableCreation::builder()
            .name(self.ident.name().to_owned())
            .schema(schema)
            .partition_spec_opt(spec)
            .build();
        if !json.is_empty() {
            creation
                .properties
                .insert(JSON_COLUMNS.to_owned(), json_value(json));
        }
        match catalog.create_table(namespace, creation).await {
            Ok(_) => {
                tracing::info!(table = %self.ident, "iceberg: created the table");
                Ok(())
            }
            // Another subtask created it between our look and ours.
            Err(_) if self.exists().await? => Ok(()),
            Err(e) => Err(what(e)),
        }
    }

    fn missing(&self) -> Error {
        Error::config(
            "table",
            format!(
                "the catalog has no table {} (`create_table = true` creates it)",
                self.ident
            ),
        )
    }

    /// What `rivus check` says of the table (nothing written).
    pub(crate) async fn report(&self) -> Result<String> {
        if !self.exists().await? {
            return if self.create.is_some() {
                Ok(format!("{}: no table yet; created at start", self.ident))
            } else {
                Err(self.missing())
            };
        }
        let table = self.load().await?;
        let meta = table.metadata();
        Ok(format!(
            "{}: Iceberg table at {}, {} snapshots, {} columns",
            self.ident,
            meta.location(),
            meta.snapshots().len(),
            meta.current_schema().as_struct().fields().len()
        ))
    }

    /// The table's columns, as the files take them.
    fn columns(table: &Table) -> Result<Vec<Column>> {
        let meta = table.metadata();
        columns_of(meta.current_schema(), meta.properties())
            .map_err(|e| e.under(&format!("the table {}", table.identifier())))
    }
}

#[async_trait]
impl Publish for IcebergTable {
    async fn open(
        &self,
        ctx: &RuntimeContext,
        declared: Option<&[Column]>,
    ) -> Result<Option<Vec<Column>>> {
        *self.job.lock() = (ctx.job_name().to_owned(), ctx.task_name().to_owned());
        if !self.exists().await? {
            match (&self.create, declared) {
                (Some(by), Some(cols)) => self.create(cols, by).await?,
                // No columns declared: the table starts without any, and the records' fields
                // are added as they come (`schema_evolution = "basic"`).
                (Some(by), None) if by.is_empty() => self.create(&[], by).await?,
                (Some(_), None) => {
                    return Err(Error::config(
                        "partition_by",
                        format!(
                            "the table {} does not exist: declare the columns it is \
                             partitioned by (`schema`)",
                            self.ident
                        ),
                    ))
                }
                (None, _) => return Err(self.missing()),
            }
        }
        let table = self.load().await?;
        let meta = table.metadata();
        let partitioning = Partitioning::of(meta.default_partition_spec(), meta.current_schema())
            .map_err(|e| e.under(&format!("the table {}", self.ident)))?;
        *self.partitioning.lock() = partitioning.map(Arc::new);
        let root = table.metadata().location().trim_end_matches('/');
        let data = Location::parse(&format!("{root}/data"), "table")
            .map_err(|e| e.under(&format!("the table {}'s location", self.ident)))?;
        *self.data.lock() = Some(data);
        Ok(Some(Self::columns(&table)?))
    }

    fn location(&self) -> Option<Location> {
        self.data.lock().clone()
    }

    fn layout(&self) -> Option<Layout> {
        self.partitioning.lock().clone().map(partition::layout)
    }

    async fn evolve(&self, added: &[Column]) -> Result<Vec<Column>> {
        self.add_columns(added).await
    }

    async fn publish(
        &self,
        writer: &str,
        sequence: Option<u64>,
        files: &[Recoverable],
    ) -> Result<()> {
        self.append(writer, sequence, files).await
    }
}
