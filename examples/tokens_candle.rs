//! A small causal language model trained in candle from a token file, read where it lies: the
//! example writes a Megatron dataset (`corpus.bin` + `corpus.idx`) of tokens it makes itself
//! (documents from a noisy rule over a 64-token vocabulary: each token mostly follows from the
//! one before it), opens it with [`loaderx::tokens::TokenFile`], and trains an embedding and a
//! linear head on windows of 33 tokens at any offset (32 inputs, their 32 targets shifted by
//! one). The loss falls from that of an untrained model (ln 64 = 4.16 or above) toward the
//! rule's entropy (about 0.73 nats); the example fails if it does not halve.
//!
//! ```text
//! cargo run --release --example tokens_candle --features candle-nn [-- STEPS]
//! ```

use std::path::Path;

use loaderx::candle::candle_core::{DType, Device};
use loaderx::candle::candle_nn::{self, AdamW, Module, Optimizer, ParamsAdamW, VarBuilder, VarMap, loss};
use loaderx::candle::{CandleLoader, Converter, Widen};
use loaderx::tokens::{MegatronWriter, TokenFile, TokenType};
use loaderx::{DataLoader, SamplerMode};

const VOCAB: usize = 64;
const WINDOW: usize = 33;
const BATCH: usize = 32;

/// Writes `docs` documents of the noisy rule at `prefix` (`.bin` and `.idx`).
pub fn write_corpus(prefix: &Path, docs: usize) -> loaderx::Result<()> {
    let mut w = MegatronWriter::create(prefix, TokenType::U16, true)?;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..docs {
        let len = 200 + (next() % 300) as usize;
        let mut t = (next() % VOCAB as u64) as u16;
        let doc: Vec<u16> = (0..len)
            .map(|_| {
                // Nine times in ten the next token is the rule's; else any.
                t = if next() % 10 == 0 {
                    (next() % VOCAB as u64) as u16
                } else {
                    (t * 5 + 3) % VOCAB as u16
                };
                t
            })
            .collect();
        w.add_document(&doc)?;
    }
    w.finish()?;
    Ok(())
}

/// Trains for `steps` on the token file at `prefix`; returns the loss of each step.
pub fn train(prefix: &Path, steps: usize) -> Result<Vec<f32>, Box<dyn std::error::Error>> {
    let corpus = TokenFile::open(prefix)?;
    let windows = corpus.windows(WINDOW, None)?;
    let builder =
        DataLoader::builder().stream("tokens", windows).batch_size(BATCH).seed(0).mode(SamplerMode::Iid);
    // u16 tokens (a dtype candle lacks) arrive as the u32 ids embeddings take, widened on the
    // loader's threads.
    let converter = Converter::new(&Device::Cpu).widen(Widen::To(DType::U32));
    let mut loader = CandleLoader::new(builder, converter)?;

    let varmap = VarMap::new();
    let vs = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let embed = candle_nn::embedding(VOCAB, 32, vs.pp("embed"))?;
    let head = candle_nn::linear(32, VOCAB, vs.pp("head"))?;
    let mut opt = AdamW::new(varmap.all_vars(), ParamsAdamW { lr: 0.03, ..Default::default() })?;
    let mut losses = Vec::with_capacity(steps);
    for _ in 0..steps {
        let batch = loader.next_batch()?.expect("endless");
        let tokens = batch.get("tokens")?;
        let inputs = tokens.narrow(1, 0, WINDOW - 1)?;
        let targets = tokens.narrow(1, 1, WINDOW - 1)?;
        let logits = head.forward(&embed.forward(&inputs)?)?;
        let loss = loss::cross_entropy(&logits.flatten_to(1)?, &targets.flatten_all()?)?;
        opt.backward_step(&loss)?;
        losses.push(loss.to_scalar::<f32>()?);
    }
    Ok(losses)
}

#[allow(dead_code, reason = "the test includes this file for its functions")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let steps: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| format!("STEPS {a:?}: {e}"))?,
        None => 300,
    };
    // The corpus lives in a fresh directory of the system's temporary one, removed at the end.
    let dir = std::env::temp_dir().join(format!("loaderx-tokens-candle-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let prefix = dir.join("corpus");
    write_corpus(&prefix, 400)?;
    let corpus = TokenFile::open(&prefix)?;
    println!("{} tokens in {} documents", corpus.len(), corpus.documents().unwrap_or(0));
    let losses = train(&prefix, steps)?;
    for (i, l) in losses.iter().enumerate().filter(|(i, _)| i % 50 == 0 || *i + 1 == steps) {
        println!("step {i:4}: loss {l:.4}");
    }
    std::fs::remove_dir_all(&dir)?;
    let (first, last) = (losses[0], losses[losses.len() - 1]);
    if last > first / 2.0 {
        return Err(format!("the loss did not halve: {first:.4} -> {last:.4}").into());
    }
    Ok(())
}
