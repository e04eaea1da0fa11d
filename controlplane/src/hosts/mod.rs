//! The hosts source, CoreDNS's `hosts` plugin: names from a hosts(5) file and inline entries
//! ([`parse()`]), compiled by `skyline_dataplane::snapshot::hosts_file` and laid under the
//! snapshot of the sources before it ([`HostsSource`]); the file is read again when it changes.

mod health;
pub mod parse;
mod source;

pub use health::{HostsHealth, HostsReport};
pub use parse::{parse, parse_inline, HostsError, LineError};
pub use source::{HostsOptions, HostsSource};
