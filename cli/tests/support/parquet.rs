//! What pyarrow finds in Parquet files on the dev S3 store: per committed file its size and
//! rows, and every `id`.
#![allow(dead_code)] // each includer uses a part

use std::process::Command;

use rivus_testkit::services::s3_credentials;

/// What pyarrow finds under `prefix`: per committed file its size and rows, and all ids.
const READ: &str = r#"
import json, sys, pyarrow.fs as pfs, pyarrow.parquet as pq
endpoint, bucket, prefix, access, secret = sys.argv[1:6]
fs = pfs.S3FileSystem(endpoint_override=endpoint, access_key=access, secret_key=secret,
                      scheme="http", region="us-east-1")
files = [f for f in fs.get_file_info(pfs.FileSelector(f"{bucket}/{prefix}", recursive=True))
         if f.type == pfs.FileType.File and "/_rivus/" not in f.path]
out = {"files": [], "ids": []}
for f in sorted(files, key=lambda f: f.path):
    t = pq.read_table(f.path, filesystem=fs)
    out["files"].append([f.path, f.size, t.num_rows])
    out["ids"].extend(t.column("id").to_pylist())
print(json.dumps(out))
"#;

pub(crate) struct Found {
    /// (path, bytes, rows) per committed file.
    pub files: Vec<(String, u64, u64)>,
    pub ids: Vec<u64>,
}

/// What pyarrow finds under `prefix` of the bucket at `endpoint`.
pub(crate) fn read(py: &str, endpoint: &str, prefix: &str) -> Found {
    let (bucket, access, secret) = s3_credentials();
    let host = endpoint.trim_start_matches("http://");
    let out = Command::new(py)
        .args(["-c", READ, host, &bucket, prefix, &access, &secret])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pyarrow: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    Found {
        files: v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f[0].as_str().unwrap().to_owned(),
                    f[1].as_u64().unwrap(),
                    f[2].as_u64().unwrap(),
                )
            })
            .collect(),
        ids: v["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap())
            .collect(),
    }
}
