//! The `route` transform: each record to every route whose condition it meets, the rest to
//! `_unmatched`.

use serde_json::Value;

use rivus_sdk::prelude::Routes;

use crate::config::condition::Test;

/// A router's conditions, compiled.
pub(crate) struct Router {
    /// Where it stands in the file, named in its metrics.
    component: String,
    conditions: Vec<(String, Test)>,
    /// Where records go that meet no condition: `_unmatched`, the last route.
    unmatched: Routes,
}

impl Router {
    pub(crate) fn new(component: &str, routes: &[(String, Test)]) -> Self {
        Router {
            component: component.to_owned(),
            conditions: routes.to_vec(),
            unmatched: Routes::only(routes.len()),
        }
    }

    /// The routes `v` meets. A VRL condition that fails on a record counts as not met (as in
    /// Vector), counted in `rivus_route_condition_errors_total`.
    pub(crate) fn routes(&self, v: &Value) -> Routes {
        let picked = self
            .conditions
            .iter()
            .enumerate()
            .filter(|(_, (route, test))| match test.matches(v) {
                Ok(met) => met,
                Err(e) => {
                    metrics::counter!("rivus_route_condition_errors_total",
                        "component" => self.component.clone(), "route" => route.clone())
                    .increment(1);
                    tracing::debug!(component = %self.component, %route, error = %e,
                        "a route's condition failed: not met");
                    false
                }
            })
            .fold(Routes::none(), |r, (i, _)| r.with(i));
        if picked.is_empty() {
            self.unmatched
        } else {
            picked
        }
    }
}
