//! The `wavelet` binary: parse flags, run the subcommand, map errors to an exit code.
fn main() {}
