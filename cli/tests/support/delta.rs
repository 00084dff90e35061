//! A Delta table on the dev S3 store as `deltalake` (delta-rs, from `dev/python`) reads it.

use rivus_testkit::services::s3_credentials;
use serde_json::Value;

/// Every row of the Delta table `uri` (on the store at `endpoint`) as a JSON object, values
/// that are not JSON as their text; none while the table does not exist.
pub(crate) fn delta_rows(py: &str, uri: &str, endpoint: &str) -> Vec<Value> {
    let (_, access, secret) = s3_credentials();
    let script = r#"
import json, os, sys
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
uri, endpoint, access, secret = sys.argv[1:5]
try:
    t = DeltaTable(uri, storage_options={"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": access,
        "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"})
    for r in t.to_pyarrow_table().to_pylist():
        print(json.dumps(r, default=str))
except TableNotFoundError:
    pass
# Out without the interpreter's teardown (delta-rs's runtime threads can abort it there).
sys.stdout.flush()
os._exit(0)
"#;
    let out = std::process::Command::new(py)
        .args(["-c", script, uri, endpoint, &access, &secret])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "deltalake: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A value as text: strings as they are, null as empty, others as JSON.
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}
