# The Apple frameworks loaderx links, as text stubs (.tbd): what the macOS SDK itself holds for
# a framework (its install name and the symbols it exports), for the symbols loaderx's binaries
# use and no other. cargo-zigbuild adds $SDKROOT/System/Library/Frameworks to zig's framework
# path, so with SDKROOT at this directory the macOS CLI links `remote` and `parquet`, and the
# wheel links, without the SDK; the binaries load the real frameworks on macOS (two-level
# namespace, as an SDK link makes). The lists are every symbol the links of 2026-12-06 left
# undefined (CoreFoundation: chrono's time zones through arrow, rustls-native-certs; Security:
# the keychain's certificates); a dependency that uses another fails the link naming it, to be
# added here. Sourced by scripts/dist.sh.
apple_sdk_stub() { # dir
    local fw symbols
    for fw in CoreFoundation Security; do
        case $fw in
            CoreFoundation) symbols='_CFArrayCreate, _CFArrayGetCount, _CFArrayGetValueAtIndex,
                _CFDataGetBytePtr, _CFDataGetLength, _CFDictionaryGetValueIfPresent, _CFEqual,
                _CFNumberGetValue, _CFRelease, _CFRetain, _CFStringCreateWithBytesNoCopy,
                _CFStringGetBytes, _CFStringGetCStringPtr, _CFStringGetLength, _kCFAllocatorDefault,
                _kCFAllocatorNull, _kCFTypeArrayCallBacks' ;;
            Security) symbols='_SecCertificateCopyData, _SecCopyErrorMessageString,
                _SecTrustSettingsCopyCertificates, _SecTrustSettingsCopyTrustSettings' ;;
        esac
        mkdir -p "$1/System/Library/Frameworks/$fw.framework"
        cat > "$1/System/Library/Frameworks/$fw.framework/$fw.tbd" <<TBD
--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos, arm64e-macos ]
install-name:    '/System/Library/Frameworks/$fw.framework/Versions/A/$fw'
exports:
  - targets:         [ x86_64-macos, arm64-macos, arm64e-macos ]
    symbols:         [ $(echo $symbols) ]
...
TBD
    done
}
