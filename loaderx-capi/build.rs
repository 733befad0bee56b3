//! The macOS shared library's install name: `@rpath/libloaderx_capi.dylib`, as a library that is
//! shipped (in the C archive, `scripts/dist.sh`) has. Apple's linker would record the path it was
//! built at, which a program linked against it then looks for at run time, on a machine that has
//! no such path.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_VENDOR").is_ok_and(|v| v == "apple") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libloaderx_capi.dylib");
    }
}
