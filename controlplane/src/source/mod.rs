//! Sources of records: each turns what it reads into typed records and publishes snapshots.

pub mod file;
pub mod overrides;
pub mod records_file;
pub mod stats;

pub use file::FileSource;
pub use overrides::{Overrides, OverridesSender};
pub use stats::SourceStats;
