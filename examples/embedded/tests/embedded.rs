//! The embedding program runs a pipeline file end to end: every generated record reaches the
//! sink once, a checkpoint completes, and a bad file is refused naming its field.

use std::process::Command;

#[test]
fn a_program_of_its_own_runs_a_pipeline_file_through_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("orders.toml");
    std::fs::write(
        &file,
        "name = \"embedded\"\n\
         [checkpoint]\ninterval = \"100ms\"\ndir = \"state\"\n\
         [source]\ntype = \"generator\"\ncount = 500\nrate = 2000\n\
         [[transform]]\ntype = \"filter\"\nfield = \"amount\"\nop = \">=\"\nvalue = 0\n\
         [sink]\ntype = \"stdout\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_embedded-pipeline"))
        .arg(&file)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let ids: std::collections::BTreeSet<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids.len(), 500, "every generated record once");
    assert!(stderr.contains("embedded: 500 records read"), "{stderr}");
    assert!(
        !stderr.contains(" 0 checkpoints"),
        "a checkpoint completed: {stderr}"
    );
    assert!(
        dir.path().join("state").is_dir(),
        "the checkpoints are in the file's dir"
    );

    std::fs::write(&file, "name = \"embedded\"\n[source]\ntype = \"generator\"\ncount = \"x\"\n[sink]\ntype = \"stdout\"\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_embedded-pipeline"))
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("source.count"),
        "the bad field is named: {stderr}"
    );
}
