fn main() {
    // Only the Node binding links against napi; the core and the WebAssembly
    // build need no setup.
    if std::env::var_os("CARGO_FEATURE_NODE").is_some() {
        napi_build::setup();
    }
}
