//! `info` and `verify` of token files (a Megatron dataset's `.bin`/`.idx` or prefix, an llm.c
//! token file, a headerless token file given `--dtype`): what their headers say, and every
//! token and index entry checked.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use loaderx_core::tokens::{TokenFile, TokenFormat, TokenType};

/// Whether `path` names a token file rather than a store (a directory): anything else that is
/// there, or the prefix of a Megatron dataset (`PATH.idx` beside it). A FIFO or a device is
/// taken as a token file too, so that the token reader refuses it by name as no regular file.
pub fn is_token_path(path: &Path) -> bool {
    let mut idx = path.as_os_str().to_owned();
    idx.push(".idx");
    match path.metadata() {
        Ok(m) => !m.is_dir(),
        Err(_) => PathBuf::from(idx).metadata().is_ok(),
    }
}

/// The token type named `name` (`u16` or NumPy's `uint16`).
fn token_type(name: &str) -> anyhow::Result<TokenType> {
    Ok(match name {
        "u8" | "uint8" => TokenType::U8,
        "i8" | "int8" => TokenType::I8,
        "u16" | "uint16" => TokenType::U16,
        "i16" | "int16" => TokenType::I16,
        "u32" | "uint32" => TokenType::U32,
        "i32" | "int32" => TokenType::I32,
        "i64" | "int64" => TokenType::I64,
        _ => anyhow::bail!("--dtype {name}: a token type is u8, i8, u16, i16, u32, i32 or i64"),
    })
}

/// Opens the token file at `path` (headerless with `dtype`), with `vocab` set when given.
pub fn open(path: &Path, dtype: Option<&str>, vocab: Option<u64>) -> anyhow::Result<TokenFile> {
    let f = match dtype {
        Some(d) => TokenFile::open_raw(path, token_type(d)?).map_err(anyhow::Error::from),
        // A file that is no store and no token file loaderx knows by its header: most often
        // the user's own data, met before its conversion (look 121, L121-2: the engine's words
        // named a Rust call and a Python argument).
        None => TokenFile::open(path).map_err(|e| match e {
            loaderx_core::Error::BadInput { reason, .. } if reason.contains("needs its token type") => {
                anyhow::anyhow!(
                    "{} is neither a loaderx store nor a token file known by its header (a Megatron .bin/.idx, an \
                     llm.c file): convert it to a dataset first (`loaderx convert npy|jsonl|idx|safetensors|parquet|dir \
                     FILE OUT`), or, for a headerless file of tokens, give --dtype",
                    path.display()
                )
            }
            e => e.into(),
        }),
    }?; // its errors name the path (a context naming it again printed it twice)
    Ok(match vocab {
        Some(v) => f.vocabulary(v),
        None => f,
    })
}

/// `loaderx info TOKENS [--dtype T] [--json]`.
pub fn info(path: &Path, dtype: Option<&str>, json: bool) -> anyhow::Result<()> {
    let f = open(path, dtype, None)?;
    let format = format_name(f.format());
    let index = match f.format() {
        TokenFormat::Megatron { index } => Some(index.display().to_string()),
        TokenFormat::Llmc { .. } | TokenFormat::Raw => None,
    };
    if json {
        let v = serde_json::json!({
            "path": f.path().display().to_string(),
            "index": index,
            "format": format,
            "dtype": f.token_type().name(),
            "tokens": f.len(),
            "sequences": f.sequences_in_index(),
            "documents": f.documents(),
        });
        return crate::print(&format!("{v}\n"));
    }
    let mut t = format!("path:    {}\n", f.path().display());
    if let Some(i) = &index {
        t.push_str(&format!("index:   {i}\n"));
    }
    t.push_str(&format!(
        "format:  {format} token file\ndtype:   {}\ntokens:  {}\n",
        f.token_type().name(),
        f.len()
    ));
    if let (Some(s), Some(d)) = (f.sequences_in_index(), f.documents()) {
        t.push_str(&format!("sequences: {s}\ndocuments: {d}\n"));
    }
    crate::print(&t)
}

/// `loaderx verify TOKENS [--dtype T] [--vocab-size N] [--json]`: exit 0 only if every token
/// (and index entry) is what a reader relies on. A token file's check stops at its first
/// problem, which it names (the JSON's `error`; `null` when intact).
pub fn verify(path: &Path, dtype: Option<&str>, vocab: Option<u64>, json: bool) -> anyhow::Result<ExitCode> {
    let f = open(path, dtype, vocab)?;
    let result = f.verify();
    let code = if result.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    // A file past one of the reader's limits (a document of 2^32 tokens or more) is not
    // damaged: it is not checked, and said so (look 85, F85-1).
    let limit = matches!(result, Err(loaderx_core::Error::InvalidArgument(_)));
    if json {
        let v = serde_json::json!({
            "path": f.path().display().to_string(),
            "format": format_name(f.format()),
            "dtype": f.token_type().name(),
            "tokens": f.len(),
            "vocab_size": vocab,
            // null: not known, the file being past a limit of this reader.
            "intact": (!limit).then_some(result.is_ok()),
            "error": result.as_ref().err().map(|e| loaderx_core::error_chain(e)),
        });
        crate::print(&format!("{v}\n"))?;
        return Ok(code);
    }
    match result {
        Ok(()) => {
            let vocab = vocab.map_or(String::new(), |v| format!(", every id below {v}"));
            crate::print(&format!(
                "{}: {} tokens, index and tokens intact{vocab}\n",
                f.path().display(),
                f.len()
            ))?;
        }
        Err(e) => {
            let what = if limit { "not checked" } else { "damaged" };
            crate::print(&format!("{}: {what}: {}\n", path.display(), loaderx_core::error_chain(&e)))?;
        }
    }
    Ok(code)
}

/// The name `info` and `verify` give a token file's layout.
fn format_name(format: &TokenFormat) -> &'static str {
    match format {
        TokenFormat::Megatron { .. } => "megatron",
        TokenFormat::Llmc { .. } => "llmc",
        TokenFormat::Raw => "raw",
    }
}
