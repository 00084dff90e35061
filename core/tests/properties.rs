//! Property tests: the schemas take any bytes without panicking and every error names the
//! record's position; dead letters keep any payload and fields through their JSON form.

use proptest::prelude::*;
use rivus_sdk::error_policy::DeadLetter;
use rivus_sdk::schema::{BytesSchema, DeserializationSchema, JsonSchema, StringSchema};

/// Bytes that are often almost JSON: fragments of JSON joined with arbitrary bytes.
fn json_like() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"[".to_vec()),
        Just(b"]".to_vec()),
        Just(b"\"a\":".to_vec()),
        Just(b"1e999".to_vec()),
        Just(b"NaN".to_vec()),
        Just(b"\xef\xbb\xbf".to_vec()),
        Just(b"\"\\ud800\"".to_vec()),
        Just(b",".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|p| p.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn schemas_never_panic_and_errors_name_the_position(
        data in prop_oneof![proptest::collection::vec(any::<u8>(), 0..300), json_like()]
    ) {
        let position = "orders/3@1234";
        prop_assert_eq!(BytesSchema.deserialize(&data, &position).unwrap(), data.clone());
        match StringSchema.deserialize(&data, &position) {
            Ok(s) => prop_assert_eq!(s.as_bytes(), &data[..]),
            Err(e) => {
                prop_assert!(std::str::from_utf8(&data).is_err());
                prop_assert_eq!(&e.position, position);
                prop_assert!(e.to_string().contains(position));
            }
        }
        let json: Result<serde_json::Value, _> = JsonSchema::new().deserialize(&data, &position);
        if let Err(e) = json {
            prop_assert_eq!(&e.position, position);
            prop_assert!(!e.message.is_empty());
        }
    }

    #[test]
    fn dead_letters_keep_any_payload_and_fields(
        payload in proptest::collection::vec(any::<u8>(), 0..200),
        text in ".{0,40}",
        fields in proptest::collection::vec(
            (".{0,10}", proptest::collection::vec(any::<u8>(), 0..20)), 0..4),
        time_ms in 0i64..4_102_444_800_000,
    ) {
        let letter = DeadLetter {
            connector: "kafka".into(),
            origin: "source[1]".into(),
            position: text.clone(),
            reason: text,
            payload,
            fields,
            time_ms,
        };
        let json = letter.to_json();
        prop_assert!(!json.contains(&b'\n'), "one line per letter");
        prop_assert_eq!(DeadLetter::from_json(&json).unwrap(), letter);
    }
}

#[test]
fn a_nesting_bomb_is_an_error_not_a_stack_overflow() {
    let bomb = "[".repeat(200_000);
    let r: Result<serde_json::Value, _> = JsonSchema::new().deserialize(bomb.as_bytes(), &"t/0@1");
    let e = r.unwrap_err();
    assert!(e.to_string().contains("t/0@1"), "{e}");
}
