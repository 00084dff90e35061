//! Added columns: the fields records bring become optional columns of the table, in one
//! commit (the schema update, and the JSON columns' names in the table's properties) before
//! any file holding them is written, so no snapshot names a file with a column the table
//! lacks. A name another writer added first keeps that writer's type; a name differing from
//! a column only in case is not added (engines that match names without case would see two
//! columns as one) and its records go to the error policy.

use iceberg::transaction::AddColumn;
use iceberg::transaction::{ApplyTransactionAction, Transaction};

use rivus_connector_files::{Column, ColumnType};
use rivus_sdk::Result;

use super::IcebergTable;
use crate::columns::{json_names, json_value, type_of, JSON_COLUMNS};
use crate::error::iceberg_error;

impl IcebergTable {
    /// Adds `added` to the table; returns the table's columns after it.
    pub(super) async fn add_columns(&self, added: &[Column]) -> Result<Vec<Column>> {
        let table = self.load().await?;
        let current = Self::columns(&table)?;
        let new: Vec<&Column> = added
            .iter()
            .filter(|c| !current.iter().any(|k| k.name.eq_ignore_ascii_case(&c.name)))
            .collect();
        if new.is_empty() {
            return Ok(current);
        }
        let names: Vec<&str> = new.iter().map(|c| c.name.as_str()).collect();
        let what = || format!("iceberg: adding the columns {names:?} to {}", self.ident);
        let tx = Transaction::new(&table);
        let mut schema = tx.update_schema();
        for c in &new {
            schema = schema.add_column(AddColumn::optional(&c.name, type_of(c.ty)));
        }
        let mut tx = schema.apply(tx).map_err(|e| iceberg_error(what(), e))?;
        let json: Vec<&str> = new
            .iter()
            .filter(|c| c.ty == ColumnType::Json)
            .map(|c| c.name.as_str())
            .collect();
        if !json.is_empty() {
            let mut all = json_names(table.metadata().properties());
            all.extend(json.iter().map(|n| (*n).to_owned()));
            tx = tx
                .update_table_properties()
                .set(
                    JSON_COLUMNS.to_owned(),
                    json_value(all.iter().map(String::as_str)),
                )
                .apply(tx)
                .map_err(|e| iceberg_error(what(), e))?;
        }
        match tx.commit(self.catalog().await?.as_ref()).await {
            Ok(table) => {
                tracing::info!(table = %self.ident, columns = ?names, "iceberg: added columns");
                metrics::counter!("rivus_iceberg_columns_added").increment(new.len() as u64);
                let columns = Self::columns(&table)?;
                *self.table.lock() = Some(table);
                Ok(columns)
            }
            Err(e) => {
                // Another writer may have added them since: then the table's stand.
                let table = self.load().await?;
                let columns = Self::columns(&table)?;
                if names.iter().all(|n| columns.iter().any(|c| c.name == *n)) {
                    Ok(columns)
                } else {
                    Err(iceberg_error(what(), e))
                }
            }
        }
    }
}
