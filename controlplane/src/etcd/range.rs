//! Reading every key of a range at one revision, in pages bounded at both ends: what the etcd
//! source's full read and kube2etcd's resync both need.

use etcd_client::{Client, GetOptions, KeyValue};
use std::time::Duration;

/// Keys per page of a range read: large enough that a million keys take 200 requests, small
/// enough that one page stays a few megabytes.
const PAGE_KEYS: usize = 5000;

/// Largest message accepted from etcd: a page of large values, a keys-only listing of a million
/// keys, or one watch response holding a transaction's worth of events. etcd itself caps a value
/// at 1.5 MiB by default.
pub(crate) const MAX_MESSAGE: usize = 256 << 20;

/// Why a range read failed.
#[derive(Debug, thiserror::Error)]
pub enum RangeError {
    /// The client reported an error: connection, TLS, authentication, or an etcd status.
    #[error("{}", super::plain::plain(.0))]
    Etcd(#[from] etcd_client::Error),
    /// etcd did not answer one request in time.
    #[error("etcd did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
}

/// What a range read saw besides its keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Read {
    /// The revision the range was read at.
    pub revision: i64,
    /// The cluster that answered.
    pub cluster: u64,
}

/// The first key after every key that starts with `prefix` (etcd's range end for a prefix).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// Reads every key that starts with `prefix` at one revision, handing each to `each`; each
/// request may take `limit`. etcd 3.4 collects every key from a page's start to the range end
/// before applying a limit, so open-ended pages would cost the square of the key count (minutes
/// at a million): one keys-only listing instead, then pages of values bounded at both ends.
pub(crate) async fn read_prefix(
    client: &Client,
    prefix: &[u8],
    limit: Duration,
    mut each: impl FnMut(&KeyValue),
) -> Result<Read, RangeError> {
    let mut kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE);
    let end = prefix_end(prefix);
    let listing = GetOptions::new().with_range(end.clone()).with_keys_only();
    let mut listed = within(limit, kv.get(prefix, Some(listing))).await?;
    let header = listed.header();
    let read = Read {
        revision: header.map_or(0, |h| h.revision()),
        cluster: header.map_or(0, |h| h.cluster_id()),
    };
    let keys: Vec<Vec<u8>> = listed.take_kvs().into_iter().map(|kv| kv.key().to_vec()).collect();
    let pages: Vec<&[Vec<u8>]> = keys.chunks(PAGE_KEYS).collect();
    for (i, page) in pages.iter().enumerate() {
        let page_end = pages.get(i + 1).map_or_else(|| end.clone(), |next| next[0].clone());
        let options = GetOptions::new().with_range(page_end).with_revision(read.revision);
        let values = within(limit, kv.get(page[0].clone(), Some(options))).await?;
        values.kvs().iter().for_each(&mut each);
    }
    Ok(read)
}

/// Runs an etcd request with a deadline.
pub(crate) async fn within<T>(
    limit: Duration,
    request: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, RangeError> {
    match tokio::time::timeout(limit, request).await {
        Ok(result) => result.map_err(RangeError::from),
        Err(_) => Err(RangeError::Timeout(limit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_after_its_last_key() {
        assert_eq!(prefix_end(b"/skydns/"), b"/skydns0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), b"\0");
    }
}
