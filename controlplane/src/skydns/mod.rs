//! The SkyDNS data model as stored in etcd: record values and the `/<prefix>/config` object,
//! decoded from JSON the way SkyDNS (Go's `encoding/json`) decodes them, and checked.

pub mod config;
mod json;
mod names;
pub mod record;

pub use config::{ConfigError, ConfigPatch};
pub use json::JsonError;
pub use record::{parse_record, parse_value, Decoded, RecordError, SkippedView, SkippedViews, ViewError};
