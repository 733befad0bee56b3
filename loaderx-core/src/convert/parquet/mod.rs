//! Parquet files (how most Hugging Face datasets ship) into one dataset per column, read row
//! group by row group through the Apache Arrow `parquet` crate (feature `parquet`).

//!
//! | file | what |
//! | --- | --- |
//! | `convert` | [`parquet`]: planning, parallel row-group windows, one dataset per column |
//! | `records` | Arrow arrays as records, column types as layouts |

mod convert;
mod records;

pub use convert::{Nulls, ParquetColumn, parquet, parquet_part};
