//! etcd client errors as a person reads them. The client's own text of a gRPC status dumps the
//! transport error beneath it in Rust's debug form (`tonic::transport::Error(Transport,
//! ConnectError(...))`); this says what the status means and then each cause in its own words.

use std::error::Error as _;

/// `error` in words: the status's meaning and message, then each underlying cause.
pub(crate) fn plain(error: &etcd_client::Error) -> String {
    let (mut text, mut cause) = match error {
        etcd_client::Error::GRpcStatus(status) => {
            let meaning = status.code().description().trim_end_matches('.').to_owned();
            let text = match status.message() {
                "" => meaning,
                message => format!("{meaning}: {message}"),
            };
            (text, status.source())
        }
        other => (other.to_string(), other.source()),
    };
    while let Some(source) = cause {
        let part = source.to_string();
        if !part.is_empty() && !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        cause = source.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What etcd's client says when nothing listens: a gRPC status over a transport error.
    #[test]
    fn a_refused_connection_reads_as_words_without_debug_output() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let error = runtime.block_on(async {
            let options = etcd_client::ConnectOptions::new()
                .with_connect_timeout(std::time::Duration::from_secs(2))
                .with_timeout(std::time::Duration::from_secs(2));
            let endpoint = format!("http://127.0.0.1:{port}");
            match etcd_client::Client::connect([endpoint], Some(options)).await {
                Ok(mut client) => client.get("x", None).await.unwrap_err(),
                Err(error) => error,
            }
        });
        let raw = error.to_string();
        let text = plain(&error);
        assert!(text.to_lowercase().contains("refused"), "{text} (from {raw})");
        for debug in [
            "Custom {",
            "Os {",
            "kind:",
            "Some(",
            "tonic::",
            "ConnectError(",
            "grpc request error",
        ] {
            assert!(!text.contains(debug), "{debug:?} in {text} (from {raw})");
        }
    }
}
