//! Sources of records: each turns what it reads into typed records and publishes snapshots.
//! Every source (the records file here, [`crate::etcd`], [`crate::kubernetes`],
//! [`crate::hosts`]) is a [`Source`] and reports through a [`SourceReport`] ([`seam`]).

pub mod file;
pub mod overrides;
pub mod records_file;
pub mod renewal;
pub mod seam;
pub mod stats;

pub use file::FileSource;
pub use overrides::{Overrides, OverridesSender};
pub use seam::{Family, HistogramFamily, Kind, Source, SourceReport, StartError, Value};
pub use stats::SourceStats;
