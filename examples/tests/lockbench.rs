//! The benchmark in smoke mode: it completes, its JSON report has every scenario with the
//! documented fields (ZooKeeper's, etcd's and PostgreSQL's too: `scripts/test` installs them),
//! and the picture next to it is well-formed SVG with the held-locks curves. (Its figures are
//! not checked: speed is for the benchmark to report, not for tests to assert.)

use std::process::Command;

#[test]
fn lockbench_smoke_run_writes_a_valid_report() {
    let dir = std::env::temp_dir().join(format!("lockbench-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("lockbench.json");
    let status = Command::new(env!("CARGO_BIN_EXE_lockbench"))
        .args(["--smoke", "--out"])
        .arg(&out)
        .status()
        .expect("run lockbench");
    assert!(status.success(), "lockbench failed: {status}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("valid JSON");
    let rows = report.as_array().expect("a list of rows");
    for prefix in [
        "1 uncontended",
        "2 hot key",
        "3 attribute",
        "4 redlock",
        "5 no starving",
        "6 zookeeper",
        "7 etcd",
        "8 postgres",
        "9 semaphore",
        "10 held",
        "13 mysql",
    ] {
        assert!(
            rows.iter()
                .any(|r| r["scenario"].as_str().unwrap().starts_with(prefix)),
            "no rows for scenario {prefix}"
        );
    }
    for row in rows {
        for field in ["scenario", "metric", "baseline_name", "unit"] {
            assert!(row[field].is_string(), "{field} missing in {row}");
        }
        for field in ["ours", "baseline"] {
            assert!(
                row[field].as_f64().is_some_and(|v| v >= 0.0),
                "{field} in {row}"
            );
        }
        assert!(row.get("ratio").is_some(), "ratio missing in {row}");
    }
    let svg = std::fs::read_to_string(dir.join("lockbench.svg")).expect("the SVG is written");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg", "the root is <svg>");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    for caption in [
        "client memory per held lock",
        "Redis CPU per held lock",
        "ratios against their targets",
    ] {
        assert!(
            texts.iter().any(|t| t.contains(caption)),
            "no {caption:?} in the SVG's texts: {texts:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
