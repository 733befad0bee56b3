// `loaderx bench`: the JSON rows are complete and self-consistent and the plot is an SVG. Tiny
// sizes keep it to seconds in the dev profile; no figure is asserted on (timing decides nothing).

use std::process::Command;

use serde_json::Value;

fn bench_json(args: &[&str]) -> Vec<Value> {
    let out =
        Command::new(env!("CARGO_BIN_EXE_loaderx")).arg("bench").args(args).output().expect("run loaderx");
    assert!(out.status.success(), "status {:?}, stderr {}", out.status, String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    v.as_array().expect("one array").clone()
}

/// Every row has the fields; every named baseline is a row of the same layer, workload and unit,
/// and `ratio` is value over its value.
fn check_rows(rows: &[Value], layer: &str) {
    assert!(!rows.is_empty());
    for r in rows {
        for k in ["layer", "name", "workload", "value", "unit", "baseline", "ratio"] {
            assert!(r.get(k).is_some(), "row {r} lacks {k}");
        }
        assert_eq!(r["layer"], layer);
        let value = r["value"].as_f64().expect("numeric value");
        assert!(value.is_finite() && value > 0.0, "{r}");
        match r["baseline"].as_str() {
            None => assert!(r["ratio"].is_null(), "{r}"),
            Some(b) => {
                let base = rows
                    .iter()
                    .find(|o| o["name"] == b && o["workload"] == r["workload"] && o["unit"] == r["unit"])
                    .unwrap_or_else(|| panic!("baseline {b} of {r} is not a row"));
                let expect = value / base["value"].as_f64().unwrap();
                let ratio = r["ratio"].as_f64().expect("numeric ratio");
                assert!((ratio - expect).abs() <= 1e-9 * expect.abs().max(1.0), "{r}: {ratio} != {expect}");
            }
        }
    }
}

#[test]
fn bench_sampler_json_rows_name_existing_baselines() {
    let rows = bench_json(&["sampler", "--quick", "--json", "--rounds", "1"]);
    check_rows(&rows, "sampler");
    assert!(rows.iter().any(|r| r["name"] == "loaderx IID" && r["baseline"] == "rand StdRng loop"));
}

#[test]
fn bench_store_json_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("out.svg");
    let rows = bench_json(&[
        "store",
        "--quick",
        "--json",
        "--records",
        "600",
        "--dict-records",
        "600",
        "--record-kib",
        "4",
        "--rounds",
        "1",
        "--dir",
        dir.path().to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    check_rows(&rows, "store");
    for name in [
        "memcpy → page-aligned (flat mmap)",
        "memcpy → page + 2 KiB (flat mmap)",
        "memcpy → Vec (flat mmap)",
        "loaderx raw",
        "loaderx zstd",
        "loaderx zstd_dict",
        "npy mmap",
        "safetensors mmap",
    ] {
        assert!(rows.iter().any(|r| r["name"] == name), "no {name} row");
    }
    let text = std::fs::read_to_string(&svg).expect("the plot was written");
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(80)]);
    // The generated data is removed; only the plot remains.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("out.svg")]);
}

#[test]
fn bench_rejects_a_records_count_below_the_batch() {
    let out = Command::new(env!("CARGO_BIN_EXE_loaderx"))
        .args(["bench", "store", "--records", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--records"), "{err}");
}

#[test]
fn bench_loader_json_rows_and_framework_rows_where_built() {
    let rows = bench_json(&["loader", "--quick", "--json", "--records", "600", "--rounds", "1"]);
    let (loader, adapters): (Vec<Value>, Vec<Value>) = rows.into_iter().partition(|r| r["layer"] == "loader");
    check_rows(&loader, "loader");
    assert!(
        loader.iter().any(|r| r["name"] == "loaderx identity" && r["baseline"] == "gather (calling thread)")
    );
    // Section 4 exists exactly when a framework feature of loaderx-cli is on.
    let mut expected: Vec<&str> = Vec::new();
    if cfg!(feature = "burn") {
        expected.extend(["loaderx → burn StepLoader", "burn DataLoader, InMemDataset"]);
    }
    if cfg!(feature = "burn-sqlite") {
        expected.push("burn DataLoader, SqliteDataset");
    }
    if cfg!(feature = "candle") {
        expected.extend([
            "loaderx → CandleLoader",
            "loaderx get_batch + to_tensor (calling thread)",
            "candle per-sample tensors + stack (calling thread)",
        ]);
    }
    if expected.is_empty() {
        assert!(adapters.is_empty(), "framework rows without a framework feature: {adapters:?}");
        return;
    }
    check_rows(&adapters, "adapters");
    for name in expected {
        assert!(
            adapters.iter().any(|r| r["name"] == name && r["baseline"] == "gather (calling thread)"),
            "no {name} row"
        );
    }
}

#[test]
fn bench_gather_json_rows_name_existing_baselines() {
    let mut args = vec!["gather", "--quick", "--json", "--rounds", "1", "--record-bytes", "784"];
    // With a Python that has NumPy (scripts/bench-gather.sh makes one), its rows are checked too.
    let python = std::env::var("LOADERX_BENCH_PYTHON").ok();
    if let Some(p) = &python {
        args.extend(["--python", p.as_str()]);
    }
    let rows = bench_json(&args);
    check_rows(&rows, "gather");
    for name in [
        "memcpy → page-aligned buffer, 1 thread",
        "loaderx raw → page-aligned buffer, 1 thread",
        "loaderx zstd_dict, 1 thread",
    ] {
        assert!(rows.iter().any(|r| r["name"] == name), "no row {name}");
    }
    assert_eq!(python.is_some(), rows.iter().any(|r| r["name"] == "NumPy np.take(out=)"));
}

/// Look 95 (F2): `bench --store` of a dataset holding fewer whole blocks of 64 records than a
/// batch failed its block-cyclic row. Its blocks are the largest that hold a batch.
#[test]
fn bench_store_takes_a_small_dataset_whole() {
    let dir = tempfile::tempdir().unwrap();
    for (n, block) in [(100usize, "block-cyclic (50 x 2)"), (10, "block-cyclic (10 x 1)")] {
        let ds = dir.path().join(format!("d{n}"));
        let mut w =
            loaderx_core::DatasetWriter::dense::<u8>(&ds, vec![784], loaderx_core::WriteOptions::new())
                .unwrap();
        w.append(&vec![7u8; 784 * n]).unwrap();
        w.finish().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["bench", "--store", ds.to_str().unwrap(), "--steps", "2"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
        assert!(said.lines().any(|l| l.starts_with(&format!("| {block} |"))), "{said}");
    }
    // No batch of no records, no order of no batches: usage errors, not taken as 1 (look 95).
    for flag in ["--batch", "--steps"] {
        let out = Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["bench", "--store", dir.path().join("d10").to_str().unwrap(), flag, "0"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {said}");
        assert!(said.contains(flag) && said.contains("0 is not in 1.."), "{flag}: {said}");
    }
}
