//! The records-file source against a real file in a temp dir: loading, noticing rewrites (by
//! rename and in place), keeping the old snapshot on a broken file, skipping bad records, and
//! reloads with new settings. Each test publishes into its own snapshot cell and observes only that cell.

use skyline_controlplane::skydns::ConfigPatch;
use skyline_controlplane::source::records_file::FileError;
use skyline_controlplane::source::{FileSource, Overrides};
use skyline_dataplane::snapshot::{empty_cell, Snapshot};
use skyline_dataplane::wire::Name;
use skyline_dataplane::SnapshotCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a change may take to be served: many poll intervals, for slow CI machines.
const DEADLINE: Duration = Duration::from_secs(5);

fn records(hosts: &[(&str, &str)]) -> String {
    let mut object = serde_json::json!({"/skydns/config": {"domain": "skydns.test."}});
    for (name, host) in hosts {
        object[format!("/skydns/test/skydns/{name}")] = serde_json::json!({ "host": host });
    }
    object.to_string()
}

/// Replaces the file the way editors and config managers do: write aside, then rename.
fn replace(path: &Path, text: &str) {
    let aside = path.with_extension("tmp");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

fn has_name(snapshot: &Snapshot, name: &str) -> bool {
    snapshot.contains(&Name::from_dotted(name).unwrap())
}

/// Waits until the cell publishes a snapshot satisfying `done`, failing after [`DEADLINE`].
async fn wait_for(cell: &SnapshotCell, what: &str, done: impl Fn(&Snapshot) -> bool) -> Arc<Snapshot> {
    let start = Instant::now();
    loop {
        let snapshot = cell.load_full();
        if done(&snapshot) {
            return snapshot;
        }
        assert!(start.elapsed() < DEADLINE, "{what} not published within {DEADLINE:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn setup(text: &str) -> (tempfile::TempDir, PathBuf, SnapshotCell, FileSource) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.json");
    std::fs::write(&path, text).unwrap();
    let cell = empty_cell();
    let source = FileSource::new(&path, "skydns", ConfigPatch::default(), Arc::clone(&cell));
    (dir, path, cell, source)
}

#[test]
fn a_loaded_file_is_published_as_the_first_generation() {
    let (_dir, _path, cell, mut source) = setup(&records(&[("web", "10.0.0.1"), ("api", "10.0.0.2")]));
    let loaded = source.load().unwrap();
    assert_eq!((loaded.generation, loaded.records, loaded.rejected), (1, 2, 0));
    assert_eq!(
        loaded.config.and_then(|c| c.domain),
        Some(Name::from_dotted("skydns.test.").unwrap())
    );
    let snapshot = cell.load();
    assert_eq!(snapshot.generation, 1);
    assert!(has_name(&snapshot, "web.skydns.test."));
    assert!(has_name(&snapshot, "api.skydns.test."));
    let stats = source.stats();
    assert_eq!(stats.records_loaded.load(Ordering::Relaxed), 2);
    assert_eq!(stats.reloads.load(Ordering::Relaxed), 1);
    assert_eq!(stats.generation.load(Ordering::Relaxed), 1);
}

#[test]
fn invalid_records_are_skipped_and_counted() {
    let text = r#"{
        "/skydns/test/skydns/good": {"host": "10.0.0.1"},
        "/skydns/test/skydns/typo": {"host": "10.0.0.300"},
        "/skydns/test/skydns/port": {"host": "10.0.0.3", "port": "80"},
        "/skydns/test/skydns/text": "not json at all",
        "/skydns/config": {"domain": "skydns.test."}
    }"#;
    let (_dir, _path, cell, mut source) = setup(text);
    let loaded = source.load().unwrap();
    assert_eq!((loaded.records, loaded.rejected), (1, 3));
    let stats = source.stats();
    assert_eq!(stats.records_loaded.load(Ordering::Relaxed), 1);
    assert_eq!(stats.records_rejected.load(Ordering::Relaxed), 3);
    let snapshot = cell.load();
    assert!(has_name(&snapshot, "good.skydns.test."));
    assert!(!has_name(&snapshot, "typo.skydns.test."));
    assert!(!has_name(&snapshot, "port.skydns.test."));
}

#[test]
fn a_missing_or_broken_file_fails_the_first_load_and_publishes_nothing() {
    let (_dir, path, cell, mut source) = setup("{ not json");
    assert!(matches!(source.load(), Err(FileError::Syntax(_))));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(source.load(), Err(FileError::Read(_))));
    assert_eq!(cell.load().generation, 0);
    assert_eq!(
        source.stats().reload_failures.load(Ordering::Relaxed),
        1,
        "a failed stat is not a load attempt"
    );
}

#[test]
fn the_operators_settings_win_over_the_files_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.json");
    std::fs::write(
        &path,
        r#"{"/skydns/config": {"domain": "skydns.test."}, "/skydns/org/example/web": {"host": "10.0.0.1"}}"#,
    )
    .unwrap();
    let cell = empty_cell();
    let overrides = ConfigPatch {
        domain: Some(Name::from_dotted("example.org.").unwrap()),
        ..ConfigPatch::default()
    };
    FileSource::new(&path, "skydns", overrides, Arc::clone(&cell))
        .load()
        .unwrap();
    let snapshot = cell.load();
    assert!(has_name(&snapshot, "web.example.org."));
    assert!(snapshot
        .zones
        .iter()
        .any(|z| z.apex == Name::from_dotted("example.org.").unwrap()));
    assert!(!snapshot
        .zones
        .iter()
        .any(|z| z.apex == Name::from_dotted("skydns.test.").unwrap()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn rewrites_by_rename_and_in_place_are_published_as_new_generations() {
    let (_dir, path, cell, mut source) = setup(&records(&[("one", "10.0.0.1")]));
    source.load().unwrap();
    let watch = tokio::spawn(source.watch());

    replace(&path, &records(&[("two", "10.0.0.2")]));
    let snapshot = wait_for(&cell, "the renamed file", |s| has_name(s, "two.skydns.test.")).await;
    assert_eq!(snapshot.generation, 2);
    assert!(!has_name(&snapshot, "one.skydns.test."));

    std::fs::write(&path, records(&[("three", "10.0.0.3")])).unwrap();
    let snapshot = wait_for(&cell, "the file rewritten in place", |s| {
        has_name(s, "three.skydns.test.")
    })
    .await;
    assert_eq!(snapshot.generation, 3);
    watch.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_broken_file_keeps_the_old_snapshot_until_it_is_fixed() {
    let (_dir, path, cell, mut source) = setup(&records(&[("web", "10.0.0.1")]));
    source.load().unwrap();
    let stats = source.stats();
    let watch = tokio::spawn(source.watch());

    for broken in ["{ \"/skydns/test/skydns/web\": {\"host\": ", "[1, 2]", ""] {
        let failures = stats.reload_failures.load(Ordering::Relaxed);
        replace(&path, broken);
        let start = Instant::now();
        while stats.reload_failures.load(Ordering::Relaxed) == failures {
            assert!(start.elapsed() < DEADLINE, "the broken file {broken:?} was never tried");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let snapshot = cell.load();
        assert_eq!(snapshot.generation, 1, "{broken:?} replaced the snapshot");
        assert!(has_name(&snapshot, "web.skydns.test."));
    }

    std::fs::remove_file(&path).unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(cell.load().generation, 1, "a vanished file keeps the snapshot");

    replace(&path, &records(&[("fixed", "10.0.0.9")]));
    let snapshot = wait_for(&cell, "the fixed file", |s| has_name(s, "fixed.skydns.test.")).await;
    assert_eq!(snapshot.generation, 2);
    watch.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_reload_rereads_even_an_unchanged_file_with_the_new_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.json");
    std::fs::write(&path, records(&[("web", "10.0.0.1")])).unwrap();
    let cell = empty_cell();
    let (reload, overrides) = Overrides::channel(ConfigPatch::default());
    let mut source = FileSource::new(&path, "skydns", overrides, Arc::clone(&cell));
    source.load().unwrap();
    let watch = tokio::spawn(source.watch());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        cell.load().generation,
        1,
        "an unchanged file is not reloaded by polling"
    );

    reload.replace(ConfigPatch::default());
    wait_for(&cell, "the reloaded file", |s| s.generation == 2).await;

    reload.replace(ConfigPatch {
        min_ttl: Some(17),
        ..ConfigPatch::default()
    });
    let snapshot = wait_for(&cell, "the new settings", |s| s.generation == 3).await;
    assert!(has_name(&snapshot, "web.skydns.test."));
    let apex = Name::from_dotted("skydns.test.").unwrap();
    let zone = snapshot.zones.iter().find(|z| z.apex == apex).unwrap();
    assert_eq!(zone.negative_ttl, 17, "the reload's min_ttl is the negative TTL");
    watch.abort();
}
