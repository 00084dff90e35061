//! The transforms of a pipeline file, compiled into one function over JSON records. A record a
//! transform cannot handle (text that is not JSON, a VRL program that fails) is rejected: the
//! task hands it to the error policy with the component and the reason, beside the records
//! (`Stream::reject_to`), so nothing is dropped silently and nothing marks the records.

use serde_json::Value;

use std::sync::Arc;

use crate::config::condition::Test;
use crate::config::{to_json, TransformConfig};
use crate::remap::{run_chain, Link, Ran};
use rivus_sdk::Rejected;

enum Step {
    Filter(Test),
    /// Consecutive remaps, run as one VRL value.
    Remaps(Vec<Link>),
    Rename(Vec<(String, String)>),
    Drop(Vec<String>),
    Add(Vec<(String, Value)>),
    ParseJson(String),
}

/// The compiled chain.
pub(crate) struct Transforms {
    steps: Vec<Step>,
    /// Where it stands in the file (`transforms.clean`), named in its errors and metrics.
    component: String,
}

impl Transforms {
    /// Compiles `configs` of the component at `component` (the `key` transform is not a step:
    /// it places records).
    pub(crate) fn new(configs: &[TransformConfig], component: &str) -> Self {
        let mut steps: Vec<Step> = Vec::new();
        for t in configs {
            let step = match t {
                TransformConfig::Filter { test, .. } => {
                    Step::Filter(test.clone().expect("compiled when the file was read"))
                }
                TransformConfig::Remap {
                    program,
                    drop_on_error,
                    drop_on_abort,
                    ..
                } => {
                    let link = Link {
                        program: Arc::clone(
                            program.as_ref().expect("compiled when the file was read"),
                        ),
                        drop_on_error: *drop_on_error,
                        drop_on_abort: *drop_on_abort,
                    };
                    // A remap after a remap joins its chain.
                    if let Some(Step::Remaps(chain)) = steps.last_mut() {
                        chain.push(link);
                        continue;
                    }
                    Step::Remaps(vec![link])
                }
                TransformConfig::Rename { fields } => {
                    Step::Rename(fields.iter().map(|(a, b)| (a.clone(), b.clone())).collect())
                }
                TransformConfig::Drop { fields } => Step::Drop(fields.clone()),
                TransformConfig::Add { fields } => Step::Add(
                    fields
                        .iter()
                        .map(|(k, v)| (k.clone(), to_json(v)))
                        .collect(),
                ),
                TransformConfig::ParseJson { field } => Step::ParseJson(field.clone()),
                TransformConfig::Key { .. } => continue,
            };
            steps.push(step);
        }
        Transforms {
            steps,
            component: component.to_owned(),
        }
    }

    /// True when there is nothing to do.
    pub(crate) fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Runs the chain on `record`: the records it becomes (none when a filter or an `abort`
    /// drops it; several when a remap makes `.` an array), or its rejection.
    pub(crate) fn apply(&self, record: Value) -> Out {
        self.run(0, record)
    }

    /// Runs the steps from `from` on.
    fn run(&self, from: usize, record: Value) -> Out {
        if from == self.steps.len() {
            return Out::One(Some(Ok(record)));
        }
        let Value::Object(mut m) = record else {
            return self.reject("the record is not a JSON object".into(), &record);
        };
        for (i, step) in self.steps.iter().enumerate().skip(from) {
            match step {
                Step::Filter(test) => {
                    let record = Value::Object(m);
                    match test.matches(&record) {
                        Ok(true) => {}
                        Ok(false) => return Out::One(None),
                        Err(e) => return self.reject(format!("filter: {e}"), &record),
                    }
                    let Value::Object(back) = record else {
                        unreachable!("an object was put in")
                    };
                    m = back;
                }
                Step::Rename(pairs) => {
                    for (from, to) in pairs {
                        if let Some(v) = m.remove(from) {
                            m.insert(to.clone(), v);
                        }
                    }
                }
                Step::Drop(fields) => fields.iter().for_each(|f| {
                    m.remove(f);
                }),
                Step::Add(fields) => {
                    for (k, v) in fields {
                        m.insert(k.clone(), v.clone());
                    }
                }
                Step::ParseJson(field) => {
                    let parsed = match m.get(field) {
                        Some(Value::String(text)) => serde_json::from_str::<Value>(text)
                            .map_err(|e| format!("field `{field}` is not JSON: {e}")),
                        Some(Value::Null) | None => continue,
                        Some(_) => Err(format!("field `{field}` is not text")),
                    };
                    match parsed {
                        Ok(v) => {
                            m.insert(field.clone(), v);
                        }
                        Err(reason) => return self.reject(reason, &Value::Object(m)),
                    }
                }
                Step::Remaps(chain) => {
                    let mut made = Vec::with_capacity(1);
                    run_chain(chain, Value::Object(m), &mut made);
                    // The common case, one record: on to the next step in place.
                    match (made.pop(), made.is_empty()) {
                        (Some(Ran::Record(Value::Object(next))), true) => {
                            m = next;
                            continue;
                        }
                        (last, _) => made.extend(last),
                    }
                    return Out::Many(
                        made.into_iter()
                            .flat_map(|r| self.ran(i + 1, r))
                            .collect::<Vec<_>>()
                            .into_iter(),
                    );
                }
            }
        }
        Out::One(Some(Ok(Value::Object(m))))
    }

    /// The steps from `next` on, after a chain of remaps made `r`.
    fn ran(&self, next: usize, r: Ran) -> Out {
        match r {
            Ran::Record(v) => self.run(next, v),
            Ran::Dropped(why) => {
                self.dropped(why);
                Out::One(None)
            }
            Ran::Failed { message, record } => self.reject(message, &record),
        }
    }

    /// Rejects `record`: the error policy gets it with this component and `reason`.
    fn reject(&self, reason: String, record: &Value) -> Out {
        Out::One(Some(Err(Rejected {
            position: format!("transform {}, record {}", self.component, short(record)),
            reason: format!("{}: {reason}", self.component),
            payload: serde_json::to_vec(record).unwrap_or_default(),
        })))
    }

    /// Counts a record a remap dropped, by why.
    fn dropped(&self, why: &'static str) {
        metrics::counter!("rivus_transform_dropped_total",
            "component" => self.component.clone(), "reason" => why)
        .increment(1);
    }
}

/// The records one record became, or its rejection.
pub(crate) enum Out {
    One(Option<Result<Value, Rejected>>),
    Many(std::vec::IntoIter<Result<Value, Rejected>>),
}

/// A record, shortened for a position.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

impl Iterator for Out {
    type Item = Result<Value, Rejected>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Out::One(v) => v.take(),
            Out::Many(i) => i.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use serde_json::json;

    fn chain(toml: &str) -> Transforms {
        let text = format!(
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n{toml}"
        );
        let config = parse(&text, &crate::registry::Registry::new()).unwrap();
        match &config.graph.transforms[..] {
            [t] => match &t.kind {
                crate::config::TransformKind::Steps(steps) => Transforms::new(steps, &t.path),
                crate::config::TransformKind::Route(_) => unreachable!("no router here"),
            },
            _ => Transforms::new(&[], "transform"),
        }
    }

    /// The one record (or none) `v` becomes.
    fn one(t: &Transforms, v: Value) -> Option<Value> {
        let mut out: Vec<Value> = t.apply(v).map(|r| r.unwrap()).collect();
        assert!(out.len() <= 1, "{out:?}");
        out.pop()
    }

    /// The rejection of `v`.
    fn rejected(t: &Transforms, v: Value) -> Rejected {
        match t.apply(v).collect::<Vec<_>>().pop() {
            Some(Err(r)) => r,
            other => panic!("not rejected: {other:?}"),
        }
    }

    #[test]
    fn filters_renames_drops_and_adds() {
        let t = chain(
            "[[transform]]\ntype = \"filter\"\nfield = \"amount\"\nop = \">=\"\nvalue = 10\n\
             [[transform]]\ntype = \"rename\"\nfields = { user = \"customer\" }\n\
             [[transform]]\ntype = \"drop\"\nfields = [\"secret\"]\n\
             [[transform]]\ntype = \"add\"\nfields = { origin = \"test\" }\n",
        );
        assert_eq!(one(&t, json!({"amount": 3})), None);
        assert_eq!(
            one(&t, json!({"amount": 10.5, "user": "u1", "secret": "x"})),
            Some(json!({"amount": 10.5, "customer": "u1", "origin": "test"}))
        );
    }

    #[test]
    fn text_that_is_not_json_is_rejected_whole() {
        let t = chain("[[transform]]\ntype = \"parse-json\"\nfield = \"payload\"\n");
        assert_eq!(
            one(&t, json!({"payload": "{\"a\": 1}"})),
            Some(json!({"payload": {"a": 1}}))
        );
        let bad = rejected(&t, json!({"payload": "{oops"}));
        assert!(
            bad.reason.contains("field `payload` is not JSON"),
            "{bad:?}"
        );
        assert!(
            bad.position.starts_with("transform transform, record "),
            "{bad:?}"
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&bad.payload).unwrap(),
            json!({"payload": "{oops"})
        );
    }

    #[test]
    #[cfg(feature = "vrl")]
    fn a_remap_a_vrl_filter_and_the_fixed_steps_run_in_order() {
        let t = chain(
            "[[transform]]\ntype = \"parse-json\"\nfield = \"payload\"\n\
             [[transform]]\ntype = \"remap\"\nsource = '''\n\
             .amount = to_float!(.payload.amount)\n\
             .kind = downcase(string!(.payload.kind))\n\
             if .kind == \"test\" { abort }\n\
             del(.payload)\n'''\n\
             [[transform]]\ntype = \"filter\"\ncondition = \"(.amount > 10) ?? false\"\n",
        );
        assert_eq!(
            one(
                &t,
                json!({"payload": "{\"amount\": \"12.5\", \"kind\": \"SALE\"}"})
            ),
            Some(json!({"amount": 12.5, "kind": "sale"}))
        );
        // Filtered out; aborted (dropped and counted).
        assert_eq!(
            one(
                &t,
                json!({"payload": "{\"amount\": 3, \"kind\": \"sale\"}"})
            ),
            None
        );
        assert_eq!(
            one(
                &t,
                json!({"payload": "{\"amount\": 30, \"kind\": \"Test\"}"})
            ),
            None
        );
        // A failure: rejected, naming the component and VRL's message, holding the record as
        // it reached the remap.
        let bad = rejected(
            &t,
            json!({"payload": "{\"amount\": \"much\", \"kind\": \"x\"}"}),
        );
        assert!(
            bad.reason.starts_with("transform: ") && bad.reason.contains("to_float"),
            "{bad:?}"
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&bad.payload).unwrap(),
            json!({"payload": {"amount": "much", "kind": "x"}})
        );
    }

    #[test]
    #[cfg(feature = "vrl")]
    fn remap_options_decide_what_an_abort_and_an_error_do() {
        let t = chain(
            "[[transform]]\ntype = \"remap\"\ndrop_on_abort = false\ndrop_on_error = true\n\
             source = '''\nif .skip == true { abort }\n.n = to_int!(.n)\n'''\n",
        );
        // `abort` with drop_on_abort = false: the record passes unchanged.
        assert_eq!(
            one(&t, json!({"skip": true, "n": "x"})),
            Some(json!({"skip": true, "n": "x"}))
        );
        // An error with drop_on_error = true: dropped.
        assert_eq!(one(&t, json!({"skip": false, "n": "x"})), None);
        assert_eq!(
            one(&t, json!({"skip": false, "n": "7"})),
            Some(json!({"skip": false, "n": 7}))
        );
    }

    #[test]
    #[cfg(feature = "vrl")]
    fn a_remap_making_an_array_makes_one_record_per_element_for_the_next_steps() {
        let t = chain(
            "[[transform]]\ntype = \"remap\"\nsource = \". = .items\"\n\
             [[transform]]\ntype = \"add\"\nfields = { seen = true }\n",
        );
        let out: Vec<Value> = t
            .apply(json!({"items": [{"a": 1}, {"a": 2}]}))
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(
            out,
            vec![json!({"a": 1, "seen": true}), json!({"a": 2, "seen": true})]
        );
    }
}
