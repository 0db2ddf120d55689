//! What wavelet is built from, for the build script (`build.rs`): the dependency graph
//! `cargo tree` reports, the licence and source policy it must pass, the dependency list
//! embedded in the binary as `cargo auditable` does, and the CycloneDX SBOM.
//!
//! Pure functions over text and bytes; `build.rs` runs the commands and writes the files.
//! The integration tests include this module too (`tests/supply.rs`), which runs the unit
//! tests beside each function.

pub mod auditable;
pub mod deps;
pub mod json;
pub mod policy;
pub mod sbom;
