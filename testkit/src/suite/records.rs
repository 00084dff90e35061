//! Test records (`s<split>-<seq>`) and the verdict comparing what arrived with what was written:
//! missing, duplicated and out-of-order records, per split.

use std::collections::{BTreeMap, HashMap};

use rivus_sdk::DeliveryGuarantee;

/// The test record for sequence number `seq` of split `split`.
pub fn test_record(split: usize, seq: usize) -> String {
    format!("s{split}-{seq:06}")
}

fn split_of(r: &str) -> usize {
    r.strip_prefix('s')
        .and_then(|s| s.split('-').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX)
}

/// What arrived compared with what was expected.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Expected records that never arrived, per split.
    pub missing: BTreeMap<usize, Vec<String>>,
    /// Records that arrived more than once, per split, with their count.
    pub duplicated: BTreeMap<usize, Vec<(String, usize)>>,
    /// Records that arrived but were never written.
    pub unexpected: Vec<String>,
    /// Splits whose first arrivals were out of order: (split, record, the record before it).
    pub out_of_order: Vec<(usize, String, String)>,
}

impl Verdict {
    /// Checks the verdict against a guarantee: nothing missing (unless at-most-once), no
    /// duplicates (unless at-least-once), nothing unexpected, order kept within splits.
    pub fn check(&self, guarantee: DeliveryGuarantee) -> Result<(), String> {
        let mut problems = Vec::new();
        if guarantee.no_loss() && !self.missing.is_empty() {
            problems.push(format!(
                "missing records {}",
                summarize(&self.missing, |r| r.clone())
            ));
        }
        if guarantee.no_duplicates() && !self.duplicated.is_empty() {
            problems.push(format!(
                "duplicated records {}",
                summarize(&self.duplicated, |(r, n)| format!("{r}×{n}"))
            ));
        }
        if !self.unexpected.is_empty() {
            problems.push(format!(
                "records never written arrived: {:?}",
                first(&self.unexpected)
            ));
        }
        if let Some((s, r, prev)) = self.out_of_order.first() {
            problems.push(format!(
                "order broken in split {s}: {r} arrived after {prev}"
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} (guarantee declared: {guarantee})",
                problems.join("; ")
            ))
        }
    }
}

fn first<T: Clone>(v: &[T]) -> Vec<T> {
    v.iter().take(5).cloned().collect()
}

fn summarize<T>(m: &BTreeMap<usize, Vec<T>>, show: impl Fn(&T) -> String) -> String {
    m.iter()
        .map(|(split, v)| {
            let shown: Vec<String> = v.iter().take(5).map(&show).collect();
            let more = if v.len() > 5 {
                format!(" and {} more", v.len() - 5)
            } else {
                String::new()
            };
            format!(
                "in split {split}: {} ({} in all{more})",
                shown.join(", "),
                v.len()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Compares `arrived` with `expected`.
pub fn verify(expected: &[String], arrived: &[String]) -> Verdict {
    let mut v = Verdict::default();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for r in arrived {
        *counts.entry(r.as_str()).or_default() += 1;
    }
    let expected_set: HashMap<&str, ()> = expected.iter().map(|r| (r.as_str(), ())).collect();
    for r in expected {
        match counts.get(r.as_str()) {
            None => v.missing.entry(split_of(r)).or_default().push(r.clone()),
            Some(&n) if n > 1 => v
                .duplicated
                .entry(split_of(r))
                .or_default()
                .push((r.clone(), n)),
            _ => {}
        }
    }
    let mut last: HashMap<usize, &str> = HashMap::new();
    let mut seen: HashMap<&str, ()> = HashMap::new();
    for r in arrived {
        if !expected_set.contains_key(r.as_str()) {
            v.unexpected.push(r.clone());
            continue;
        }
        if seen.insert(r.as_str(), ()).is_some() {
            continue;
        }
        let s = split_of(r);
        if let Some(prev) = last.get(&s) {
            if *prev > r.as_str() {
                v.out_of_order.push((s, r.clone(), prev.to_string()));
            }
        }
        last.insert(s, r.as_str());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_names_missing_duplicated_and_order() {
        let expected: Vec<String> = (0..4).map(|i| test_record(1, i)).collect();
        let arrived = vec![
            test_record(1, 0),
            test_record(1, 2),
            test_record(1, 1),
            test_record(1, 2),
        ];
        let v = verify(&expected, &arrived);
        assert_eq!(v.missing[&1], vec![test_record(1, 3)]);
        assert_eq!(v.duplicated[&1], vec![(test_record(1, 2), 2)]);
        let msg = v.check(DeliveryGuarantee::ExactlyOnce).unwrap_err();
        assert!(
            msg.contains("missing records in split 1: s1-000003"),
            "{msg}"
        );
        assert!(msg.contains("s1-000002×2"), "{msg}");
        assert!(msg.contains("order broken in split 1"), "{msg}");
        // At-least-once tolerates the duplicate but not the loss.
        let msg = v.check(DeliveryGuarantee::AtLeastOnce).unwrap_err();
        assert!(!msg.contains("duplicated"), "{msg}");
    }
}
