//! The cheap, copyable error of the wire layer: the hot path must not allocate to report bad input.

/// Why a message or name could not be read. Each variant is counted separately by the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum WireError {
    /// The message ended inside a field.
    #[error("message truncated")]
    Truncated,
    /// A label longer than 63 bytes, or a reserved label type (0x40, 0x80).
    #[error("bad label")]
    BadLabel,
    /// A name longer than 255 bytes in wire form.
    #[error("name too long")]
    NameTooLong,
    /// Too many compression pointers, or a pointer that does not point backwards.
    #[error("compression pointer loop")]
    PointerLoop,
    /// A name given as text that is not a valid domain name.
    #[error("invalid domain name text")]
    BadText,
}
