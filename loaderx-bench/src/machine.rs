//! The machine block printed before the tables: what the figures were measured on.

use std::process::Command;

use crate::report::Section;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The first `key: value` line of `/proc/cpuinfo` for `key`.
fn cpuinfo(key: &str) -> Option<String> {
    read("/proc/cpuinfo")?
        .lines()
        .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

fn mem_total_gib() -> Option<f64> {
    let text = read("/proc/meminfo")?;
    let kib: f64 =
        text.lines().find(|l| l.starts_with("MemTotal:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / f64::from(1 << 20))
}

/// A cgroup v2 memory limit, when there is one.
fn cgroup_limit_gib() -> Option<f64> {
    let v: f64 = read("/sys/fs/cgroup/memory.max")?.trim().parse().ok()?;
    Some(v / f64::from(1 << 30))
}

fn os() -> String {
    let name = read("/etc/os-release")
        .and_then(|t| {
            t.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    match read("/proc/sys/kernel/osrelease") {
        Some(k) => format!("{name}, kernel {}", k.trim()),
        None => name,
    }
}

/// `rustc --version` of the toolchain on PATH (the one that most likely built this binary).
fn rustc() -> String {
    Command::new("rustc").arg("--version").output().ok().filter(|o| o.status.success()).map_or_else(
        || "unknown (rustc not on PATH)".into(),
        |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
    )
}

/// What `NearCopy::Measure` chose on this CPU: per distance timed, the copy taken and the
/// measured ratio of the two copies' times.
fn near_copy() -> String {
    let Some(m) = loaderx_core::NearCopy::measured() else {
        return "being measured by another thread".into();
    };
    if !cfg!(target_arch = "x86_64") {
        return "memcpy everywhere (not measured off x86_64)".into();
    }
    let per_class: Vec<String> = (0..m.distances.len())
        .map(|k| {
            let how = if (m.blocks_mask >> k) & 1 == 1 { "pieces" } else { "memcpy" };
            format!("{}: {how} {:.2}", m.distances[k], m.memcpy_ns[k] / m.blocks_ns[k])
        })
        .collect();
    format!(
        "measured (memcpy time / 256-byte pieces' time, 12 KiB in L2, by distance in bytes: 0, 16, \
         32, 48 each alone, 8 for 1-15, 24 for 17-31, ...): {}",
        per_class.join(", ")
    )
}

/// The machine table.
pub(crate) fn section() -> Section {
    let mut s = Section::new("Machine", &["machine", "value"]);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut add = |k: &str, v: String| s.rows.push(vec![k.into(), v]);
    add("CPU", cpuinfo("model name").unwrap_or_else(|| std::env::consts::ARCH.into()));
    add("cores", format!("{threads} usable threads (rayon pool {})", rayon::current_num_threads()));
    let mut mem = mem_total_gib().map_or_else(|| "unknown".into(), |g| format!("{g:.1} GiB"));
    if let Some(l) = cgroup_limit_gib() {
        mem.push_str(&format!(" ({l:.1} GiB cgroup limit)"));
    }
    add("memory", mem);
    add("OS", os());
    add("rustc", rustc());
    if let Some((vendor, family, model)) = loaderx_core::cpu::signature() {
        add("cpuid", format!("{vendor}, family {family}, model {model}"));
    }
    add("near copies", near_copy());
    add(
        "fixed-stride hints",
        format!(
            "records below {} KiB (this CPU's table)",
            loaderx_core::cpu::fixed_stride_hint_below() >> 10
        ),
    );
    add(
        "build",
        if cfg!(debug_assertions) { "debug (figures not representative)".into() } else { "release".into() },
    );
    s
}
