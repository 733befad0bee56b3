//! Parquet files (how most Hugging Face datasets ship) into one dataset per column, read row
//! group by row group through the Apache Arrow `parquet` crate (feature `parquet`), its columns
//! as records through [`super::arrow`].

//!
//! | file | what |
//! | --- | --- |
//! | `convert` | [`parquet`]: planning, parallel row-group windows, one dataset per column |

mod convert;

pub use super::arrow::Nulls;
pub use convert::{ParquetColumn, parquet, parquet_part};
