//! The gather layer's NumPy worker: a Python process (`python/gather_worker.py`) that gathers
//! the same records with `np.take` and fancy indexing, timed by itself, driven over a pipe.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, bail};

/// The NumPy worker, written next to the data when the run starts.
const WORKER: &str = include_str!("../python/gather_worker.py");

/// The NumPy worker process.
pub(crate) struct Numpy {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Numpy {
    /// Starts `python` on the worker script over `flat`, `n` records of `rec` bytes back to back;
    /// `None` (with the reason) when Python or NumPy is not there.
    pub(crate) fn start(
        python: &Path,
        dir: &Path,
        (flat, n, rec): (&Path, u32, usize),
    ) -> Result<Numpy, String> {
        let script = dir.join("gather_worker.py");
        std::fs::write(&script, WORKER).map_err(|e| format!("writing {}: {e}", script.display()))?;
        let probe = Command::new(python).args(["-c", "import numpy"]).output();
        match probe {
            Ok(o) if o.status.success() => {}
            Ok(_) => return Err(format!("{} has no NumPy", python.display())),
            Err(e) => return Err(format!("{} does not run: {e}", python.display())),
        }
        let mut child = Command::new(python)
            .arg("-u")
            .arg(&script)
            .arg(flat)
            .arg(n.to_string())
            .arg(rec.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", python.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Numpy { child, stdin, stdout })
    }

    fn ask(&mut self, line: &str) -> anyhow::Result<String> {
        writeln!(self.stdin, "{line}").context("writing to the NumPy worker")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).context("reading from the NumPy worker")?;
        if answer.is_empty() || answer.starts_with("error") {
            bail!("the NumPy worker answered {answer:?} to {line:?}");
        }
        Ok(answer.trim().to_string())
    }

    /// Loads the index batches (written to `path`, `b` per batch).
    pub(crate) fn load(&mut self, path: &Path, b: usize) -> anyhow::Result<()> {
        self.ask(&format!("load {} {b}", path.display())).map(drop)
    }

    /// Seconds of `n` gathers by `how` (`take` or `fancy`), timed by the worker.
    pub(crate) fn time(&mut self, how: &str, n: u32) -> f64 {
        let answer = self.ask(&format!("{how} {n}")).expect("the NumPy worker answers");
        let ns: f64 = answer.strip_prefix("ns ").and_then(|v| v.parse().ok()).expect("a time in ns");
        ns * 1e-9
    }

    /// Batch `k` as NumPy gathers it.
    pub(crate) fn dump(&mut self, k: usize, dir: &Path) -> anyhow::Result<Vec<u8>> {
        let out = dir.join("numpy-batch.bin");
        self.ask(&format!("dump {k} {}", out.display()))?;
        std::fs::read(&out).with_context(|| format!("reading {}", out.display()))
    }
}

impl Drop for Numpy {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}
