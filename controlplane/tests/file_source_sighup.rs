//! The records-file source reloads on SIGHUP. Alone in its test binary: the signal goes to the
//! whole process, and would make the other tests' sources reload at unexpected moments.

use skyline_controlplane::skydns::ConfigPatch;
use skyline_controlplane::source::FileSource;
use skyline_dataplane::snapshot::empty_cell;
use skyline_dataplane::sys::{send_signal, Signal};
use skyline_dataplane::wire::Name;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn sighup_reloads_even_an_unchanged_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.json");
    std::fs::write(&path, r#"{"/skydns/local/skydns/web": {"host": "10.0.0.1"}}"#).unwrap();
    let cell = empty_cell();
    let mut source = FileSource::new(&path, "skydns", ConfigPatch::default(), Arc::clone(&cell));
    source.load().unwrap();
    let watch = tokio::spawn(source.watch().unwrap());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        cell.load().generation,
        1,
        "an unchanged file is not reloaded by polling"
    );

    send_signal(std::process::id(), Signal::Hangup).unwrap();
    let start = Instant::now();
    while cell.load().generation < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "SIGHUP did not reload the file"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(cell.load().contains(&Name::from_dotted("web.skydns.local.").unwrap()));
    watch.abort();
}
