//! The C programs under AddressSanitizer, and both headers compiled as pedantic C99 and as C++.

use std::path::Path;
use std::process::Command;

use super::*;

/// Whether `cc -fsanitize=address` links a program here.
fn asan_works(dir: &Path) -> bool {
    let src = dir.join("probe.c");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    Command::new("cc")
        .args(["-fsanitize=address", "-o"])
        .arg(dir.join("probe"))
        .arg(&src)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_c_programs_run_clean_under_address_sanitizer() {
    if !have("cc") {
        skip("no C compiler (cc) on PATH");
        return;
    }
    let dir = scratch("asan");
    if !asan_works(&dir) {
        skip("cc here cannot build with -fsanitize=address");
        return;
    }
    // Only the static build is used: ASan instruments the C side and intercepts every allocation
    // and free the library makes through the C allocator, so a leak, a double free, or an access
    // outside what the library handed out is reported; detect_leaks runs LeakSanitizer at exit.
    for name in ["chunker", "store"] {
        let program = compile(name, &dir, &["-fsanitize=address", "-fno-omit-frame-pointer", "-g"]);
        let work = dir.join(format!("{name}-work"));
        std::fs::create_dir_all(&work).unwrap();
        let out = Command::new(&program.fixed)
            .arg("selftest")
            .arg(&work)
            .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=99")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !stderr.contains("ERROR: AddressSanitizer"),
            "{name} under ASan: {}\n{stderr}",
            out.status
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains(" 0 failed"));
    }
}

#[test]
fn both_headers_compile_as_pedantic_c99_and_as_cpp_and_link() {
    if !have("cc") {
        skip("no C compiler (cc) on PATH");
        return;
    }
    let dir = scratch("headers");
    let src = "#include \"mmap_chunker.h\"\n#include \"loaderx.h\"\n\
               int main(void) { return (int)(mmap_engine_abi_version() >> 16) - (int)(lx_abi_version() >> 16); }\n";
    let include = manifest_dir().join("include");
    let libs = lib_dir();
    let rpath = format!("-Wl,-rpath,{}", libs.display());
    for (compiler, file, std) in [("cc", "both.c", "-std=c99"), ("c++", "both.cpp", "-std=c++11")] {
        if compiler == "c++" && !have("c++") {
            skip("no C++ compiler (c++) on PATH");
            continue;
        }
        std::fs::write(dir.join(file), src).unwrap();
        let exe = dir.join(format!("{file}.exe"));
        let out = Command::new(compiler)
            .args([std, "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I"])
            .arg(&include)
            .arg(dir.join(file))
            .arg("-o")
            .arg(&exe)
            .arg("-L")
            .arg(&libs)
            .args(["-lloaderx_capi", &rpath])
            .output()
            .unwrap();
        assert!(out.status.success(), "{compiler} {std}: {}", String::from_utf8_lossy(&out.stderr));
        run_ok(&exe, &[]);
    }
}
