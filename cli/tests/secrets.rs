//! Secrets never leave the process: jobs run with a recognisable secret in each place a
//! secret goes — a SASL password, a key password property, a URL's password, `?password=` and
//! `sslpassword=` in a query string — some of them failing, every one through `validate`,
//! `check` and `run` with debug logs in JSON; then everything the job printed and every file it
//! wrote (checkpoints, dead letters) is searched for the secret.

use std::path::Path;
use std::process::Command;

use rivus_testkit::services::{kafka_sasl_user, require, tls_dir, unique_name, Service};

/// One pipeline file with a secret in it, and whether `rivus run` should succeed.
struct Case {
    name: &'static str,
    secret: &'static str,
    succeeds: bool,
    file: String,
}

/// Runs `rivus` with debug logs; returns (succeeded, stdout + stderr).
fn rivus(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(args)
        .args(["--log-format", "json"])
        .env("RUST_LOG", "debug")
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Every file under `dir`, read as (lossy) text.
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((
                p.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    out
}

fn header(name: &str) -> String {
    format!(
        "name = \"{name}\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"checkpoints\"\n\
         [errors]\npolicy = \"dead-letter\"\ndead_letter = \"dead-letters.jsonl\"\n\
         [source]\ntype = \"generator\"\ncount = 300\n"
    )
}

#[test]
fn no_secret_appears_in_output_logs_or_files() {
    let (Some(sasl), Some(pg), Some(pg_tls)) = (
        require(Service::KafkaSasl),
        require(Service::Postgres),
        require(Service::PostgresTls),
    ) else {
        return;
    };
    let ca = tls_dir().join("ca.crt").display().to_string();
    let (user, password) = kafka_sasl_user();
    let topic = unique_name("public-secrets");
    let pg_host = pg_tls.split('@').nth(1).unwrap().split('?').next().unwrap();
    let cases = [
        Case {
            name: "wrong-sasl-password",
            secret: "LEAK-sasl-pw-1",
            succeeds: false,
            file: format!(
                "[sink]\ntype = \"kafka\"\nbootstrap_servers = \"{sasl}\"\ntopic = \"{topic}\"\n\
                 tls = {{ ca_file = \"{ca}\" }}\n\
                 sasl = {{ mechanism = \"SCRAM-SHA-512\", username = \"{user}\", password = \"LEAK-sasl-pw-1\" }}\n"
            ),
        },
        Case {
            name: "key-password-property",
            secret: "LEAK-keypw-2",
            succeeds: true,
            file: format!(
                "[sink]\ntype = \"kafka\"\nbootstrap_servers = \"{sasl}\"\ntopic = \"{topic}\"\n\
                 exactly_once = true\n\
                 tls = {{ ca_file = \"{ca}\" }}\n\
                 sasl = {{ mechanism = \"SCRAM-SHA-512\", username = \"{user}\", password = \"{password}\" }}\n\
                 properties = {{ \"ssl.key.password\" = \"LEAK-keypw-2\" }}\n"
            ),
        },
        Case {
            name: "wrong-url-password",
            secret: "LEAK-pg-url-3",
            succeeds: false,
            file: format!(
                "[sink]\ntype = \"jdbc\"\nurl = \"postgres://rivus_tls:LEAK-pg-url-3@{pg_host}?sslmode=verify-full&sslrootcert={ca}\"\n\
                 table = \"t\"\n"
            ),
        },
        Case {
            name: "query-password",
            secret: "LEAK-query-4",
            succeeds: true,
            file: format!(
                "[sink]\ntype = \"jdbc\"\nurl = \"{pg}?password=LEAK-query-4\"\n\
                 table = \"{t}\"\nsetup = \"CREATE TABLE IF NOT EXISTS {t} (id BIGINT, \\\"user\\\" TEXT, amount NUMERIC, status TEXT, ts BIGINT)\"\n",
                t = unique_name("secrets").replace('-', "_")
            ),
        },
        // Refused at start (the driver cannot use it, and would log it as unrecognised).
        Case {
            name: "ssl-key-password",
            secret: "LEAK-sslpw-5",
            succeeds: false,
            file: format!("[sink]\ntype = \"jdbc\"\nurl = \"{pg}?sslpassword=LEAK-sslpw-5\"\ntable = \"t\"\n"),
        },
    ];
    for case in cases {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.toml");
        std::fs::write(&file, format!("{}{}", header(case.name), case.file)).unwrap();
        let file = file.to_str().unwrap();
        let mut printed = String::new();
        for cmd in ["validate", "check", "run"] {
            let (ok, text) = rivus(dir.path(), &[cmd, file]);
            if cmd == "run" {
                assert_eq!(ok, case.succeeds, "{}: run: {text}", case.name);
            }
            if cmd == "check" && case.name == "wrong-sasl-password" {
                assert!(
                    !ok && text.contains("authentication failed") && text.contains("SCRAM-SHA-512"),
                    "check names the refusal: {text}"
                );
            }
            printed.push_str(&text);
        }
        assert!(
            !printed.contains(case.secret),
            "{}: the secret was printed:\n{printed}",
            case.name
        );
        for (path, content) in files_under(dir.path()) {
            assert!(
                path.ends_with("p.toml") || !content.contains(case.secret),
                "{}: the secret is in {path}",
                case.name
            );
        }
    }
}
