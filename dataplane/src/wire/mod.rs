//! The DNS wire format: reading queries in place and writing replies. Pure byte work: no I/O,
//! no sockets, no allocation on the query path.

pub mod bytes;
pub mod error;
pub mod name;
pub mod query;
pub mod rdata;
pub mod types;
pub mod writer;

pub use error::WireError;
pub use name::{LowerName, Name};
pub use query::{parse_query, DropReason, Edns, FormatError, Query, Question};
