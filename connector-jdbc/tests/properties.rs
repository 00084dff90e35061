//! Property tests for the SQL value conversion: any JSON value, for every column class, is
//! converted or refused with what was expected — never a panic — and what converts is what
//! the class holds.

use proptest::prelude::*;
use rivus_connector_jdbc::{BytesText, Class, SqlValue};
use serde_json::Value;

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,20}".prop_map(Value::String),
        "[0-9]{1,25}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(".{0,5}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

const CLASSES: [Class; 8] = [
    Class::Int,
    Class::Float,
    Class::Bool,
    Class::Text,
    Class::Bytes(BytesText::Utf8),
    Class::Bytes(BytesText::Base64),
    Class::Bytes(BytesText::Hex),
    Class::Any,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn any_value_converts_or_says_what_was_expected(v in json()) {
        for class in CLASSES {
            match SqlValue::convert(&v, class) {
                Ok(sql) => {
                    let fits = matches!(
                        (class, &sql),
                        (Class::Int, SqlValue::Int(_))
                            | (Class::Float, SqlValue::Float(_))
                            | (Class::Bool, SqlValue::Bool(_))
                            | (Class::Text, SqlValue::Text(_))
                            | (Class::Bytes(_), SqlValue::Bytes(..))
                            | (Class::Any, _)
                    );
                    prop_assert!(fits, "{class:?} got {sql:?}");
                    prop_assert_eq!(v.is_null(), sql.to_json().is_null());
                    // What goes to a dead letter converts back to the same bytes.
                    if let Class::Bytes(_) = class {
                        prop_assert_eq!(SqlValue::convert(&sql.to_json(), class), Ok(sql.clone()));
                    }
                }
                Err(e) => prop_assert!(e.starts_with("expected "), "{class:?}: {e}"),
            }
            // The checked conversion agrees with the plain one.
            prop_assert_eq!(
                SqlValue::check(&v, class).is_ok(),
                SqlValue::convert(&v, class).is_ok()
            );
        }
    }
}
