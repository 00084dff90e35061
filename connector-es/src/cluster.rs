//! Which search engine answers, and what that decides: Elasticsearch or OpenSearch, and its
//! version, read once from `GET /` when a sink or source opens (or given, for endpoints that do
//! not answer `GET /`, like OpenSearch Serverless). From them follow the media types sent
//! (Elasticsearch 8 and 9 get the REST compatibility types, OpenSearch refuses them with 406),
//! the point-in-time API (`_pit` on Elasticsearch 7.10+, `_search/point_in_time` on OpenSearch
//! 2.4+, scroll before those) and the refusal of versions the connector cannot serve.

use std::fmt;

use rivus_sdk::{Error, Result};
use serde_json::Value;

use crate::error::short;

/// The engine's family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// Elasticsearch (7.x, 8.x, 9.x).
    Elasticsearch,
    /// OpenSearch (1.x, 2.x, 3.x; Amazon OpenSearch Service and Serverless).
    OpenSearch,
}

/// An engine and its version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cluster {
    /// Elasticsearch or OpenSearch.
    pub flavor: Flavor,
    /// `(major, minor)`.
    pub version: (u32, u32),
}

/// How a bounded read holds its view of the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PitApi {
    /// `POST /{index}/_pit`, `DELETE /_pit` (Elasticsearch 7.10+).
    Elasticsearch,
    /// `POST /{index}/_search/point_in_time`, `DELETE /_search/point_in_time` (OpenSearch 2.4+).
    OpenSearch,
    /// No point in time: sliced scroll (older versions).
    Scroll,
}

impl fmt::Display for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.flavor {
            Flavor::Elasticsearch => "Elasticsearch",
            Flavor::OpenSearch => "OpenSearch",
        };
        write!(f, "{name} {}.{}", self.version.0, self.version.1)
    }
}

impl Cluster {
    /// An Elasticsearch cluster of `major.minor`.
    pub fn elasticsearch(major: u32, minor: u32) -> Cluster {
        Cluster {
            flavor: Flavor::Elasticsearch,
            version: (major, minor),
        }
    }

    /// An OpenSearch cluster of `major.minor`.
    pub fn opensearch(major: u32, minor: u32) -> Cluster {
        Cluster {
            flavor: Flavor::OpenSearch,
            version: (major, minor),
        }
    }

    /// Reads the answer of `GET /`: OpenSearch says `version.distribution: "opensearch"`;
    /// Elasticsearch has no distribution (or says `elasticsearch`). Refuses what it cannot
    /// serve.
    pub fn from_info(info: &Value) -> Result<Cluster> {
        let number = info["version"]["number"].as_str().ok_or_else(|| {
            Error::connector(
                "search cluster: reading `GET /`",
                format!("no version.number in the answer: {}", short(info)),
            )
        })?;
        let mut parts = number.split(['.', '-']).map(|p| p.parse::<u32>().ok());
        let (Some(Some(major)), Some(Some(minor))) = (parts.next(), parts.next()) else {
            return Err(Error::connector(
                "search cluster: reading `GET /`",
                format!("version `{number}` is not major.minor.patch"),
            ));
        };
        let flavor = match info["version"]["distribution"].as_str() {
            Some("opensearch") => Flavor::OpenSearch,
            None | Some("elasticsearch") => Flavor::Elasticsearch,
            Some(other) => {
                return Err(Error::connector(
                    "search cluster: reading `GET /`",
                    format!("unknown distribution `{other}`"),
                ))
            }
        };
        let c = Cluster {
            flavor,
            version: (major, minor),
        };
        c.check()?;
        Ok(c)
    }

    /// Refuses versions this connector does not speak: Elasticsearch before 7 (bulk needs
    /// `_type`) and after 9 (no compatibility mode for the 8 request shapes is promised), and
    /// OpenSearch after 3.
    pub fn check(&self) -> Result<()> {
        let ok = match self.flavor {
            Flavor::Elasticsearch => (7..=9).contains(&self.version.0),
            Flavor::OpenSearch => (1..=3).contains(&self.version.0),
        };
        if ok {
            return Ok(());
        }
        Err(Error::connector(
            "search cluster",
            format!(
                "{self} is not supported: Elasticsearch 7.x to 9.x and OpenSearch 1.x to 3.x are \
                 (Elasticsearch 6 and older need mapping types in bulk requests)"
            ),
        ))
    }

    /// The `Content-Type` and `Accept` of JSON requests: Elasticsearch 8 and 9 are asked for
    /// the 8 REST API (`compatible-with=8`, which 9 still serves), so the answers keep the
    /// shapes this connector reads; the others get plain JSON (OpenSearch answers 406 to the
    /// vendor types).
    pub fn json_type(&self) -> &'static str {
        if self.rest_compat() {
            "application/vnd.elasticsearch+json; compatible-with=8"
        } else {
            "application/json"
        }
    }

    /// The `Content-Type` of `_bulk` bodies (newline-delimited JSON).
    pub fn ndjson_type(&self) -> &'static str {
        if self.rest_compat() {
            "application/vnd.elasticsearch+x-ndjson; compatible-with=8"
        } else {
            "application/x-ndjson"
        }
    }

    fn rest_compat(&self) -> bool {
        self.flavor == Flavor::Elasticsearch && self.version.0 >= 8
    }

    /// Which point-in-time API the cluster has.
    pub fn pit_api(&self) -> PitApi {
        match self.flavor {
            Flavor::Elasticsearch if self.version >= (7, 10) => PitApi::Elasticsearch,
            Flavor::OpenSearch if self.version >= (2, 4) => PitApi::OpenSearch,
            _ => PitApi::Scroll,
        }
    }

    /// Whether sorting on `_id` is allowed by default (Elasticsearch 8 disabled its field
    /// data: `indices.id_field_data.enabled` is false).
    pub fn sorts_on_id(&self) -> bool {
        !(self.flavor == Flavor::Elasticsearch && self.version.0 >= 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(number: &str, distribution: Option<&str>) -> Value {
        let mut v = json!({"version": {"number": number}});
        if let Some(d) = distribution {
            v["version"]["distribution"] = json!(d);
        }
        v
    }

    #[test]
    fn flavours_versions_and_what_they_decide() {
        let es7 = Cluster::from_info(&info("7.17.29", None)).unwrap();
        assert_eq!(es7, Cluster::elasticsearch(7, 17));
        assert_eq!(es7.pit_api(), PitApi::Elasticsearch);
        assert_eq!(es7.json_type(), "application/json");
        assert!(es7.sorts_on_id());
        let es8 = Cluster::from_info(&info("8.19.3", None)).unwrap();
        assert_eq!(
            es8.json_type(),
            "application/vnd.elasticsearch+json; compatible-with=8"
        );
        assert_eq!(
            es8.ndjson_type(),
            "application/vnd.elasticsearch+x-ndjson; compatible-with=8"
        );
        assert!(!es8.sorts_on_id());
        let es9 = Cluster::from_info(&info("9.1.0-SNAPSHOT", None)).unwrap();
        assert_eq!(es9.version, (9, 1));
        assert_eq!(es9.json_type(), es8.json_type());
        let os2 = Cluster::from_info(&info("2.19.6", Some("opensearch"))).unwrap();
        assert_eq!(os2.pit_api(), PitApi::OpenSearch);
        assert_eq!(os2.ndjson_type(), "application/x-ndjson");
        assert!(os2.sorts_on_id());
        let os3 = Cluster::from_info(&info("3.3.2", Some("opensearch"))).unwrap();
        assert_eq!(os3.json_type(), "application/json");
        // Before their point-in-time APIs: scroll.
        assert_eq!(Cluster::opensearch(2, 3).pit_api(), PitApi::Scroll);
        assert_eq!(Cluster::opensearch(1, 3).pit_api(), PitApi::Scroll);
        assert_eq!(Cluster::elasticsearch(7, 9).pit_api(), PitApi::Scroll);
        // OpenSearch 1.x answers GET / with its own number too.
        assert_eq!(
            Cluster::from_info(&info("1.3.20", Some("opensearch")))
                .unwrap()
                .to_string(),
            "OpenSearch 1.3"
        );
    }

    #[test]
    fn versions_it_cannot_serve_are_refused_by_name() {
        let e = Cluster::from_info(&info("6.8.23", None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("Elasticsearch 6.8 is not supported"), "{e}");
        let e = Cluster::from_info(&info("4.0.0", Some("opensearch")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("OpenSearch 4.0"), "{e}");
        let e = Cluster::from_info(&json!({"ok": true}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("version.number"), "{e}");
        let e = Cluster::from_info(&info("2.19.0", Some("solr")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown distribution `solr`"), "{e}");
    }
}
