//! Tests of the pipeline-file parser, property tests among them.

use super::*;

/// The file parsed with every built-in connector.
fn parse(raw: &str) -> Result<PipelineConfig, String> {
    super::parse(raw, &Registry::builtin())
}

#[test]
fn environment_references_expand() {
    std::env::set_var("RIVUS_TEST_X", "v");
    assert_eq!(expand_env("a ${RIVUS_TEST_X} b").unwrap(), "a v b");
    let e = expand_env("a\nb ${RIVUS_NOT_SET_ANYWHERE}").unwrap_err();
    assert_eq!(
        e,
        "line 2: environment variable RIVUS_NOT_SET_ANYWHERE is not set"
    );
}

#[test]
fn a_comment_naming_a_variable_needs_no_variable() {
    std::env::set_var("RIVUS_TEST_TOPIC", "orders");
    let c = parse(
        "# The password comes from ${RIVUS_NOT_SET_ANYWHERE} in production.\n\
         name = \"c\" # not ${RIVUS_NOT_SET_EITHER}\n\
         [source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n\
         # topic = \"${RIVUS_NOT_SET_ANYWHERE}\"\n",
    );
    assert!(c.is_ok(), "{:?}", c.err());
    let e = parse("name = \"${RIVUS_NOT_SET_ANYWHERE}\"\n").unwrap_err();
    assert!(e.contains("RIVUS_NOT_SET_ANYWHERE is not set"), "{e}");
}

fn with_restart(section: &str) -> Result<PipelineConfig, String> {
    parse(&format!(
        "name = \"r\"\n[restart]\n{section}\n[source]\ntype = \"generator\"\n\
         [sink]\ntype = \"stdout\"\n"
    ))
}

#[test]
fn restart_sections() {
    use rivus_core::RestartStrategy as S;
    let c = with_restart("strategy = \"exponential-delay\"").unwrap();
    assert_eq!(
        c.restart.unwrap().strategy(),
        S::exponential_delay(),
        "the defaults are Flink's"
    );
    let c = with_restart("strategy = \"fixed-delay\"\ndelay = \"2s\"\nmax_attempts = 3").unwrap();
    assert_eq!(
        c.restart.unwrap().strategy(),
        S::FixedDelay {
            delay: Duration::from_secs(2),
            max_attempts: 3
        }
    );
    let c = with_restart("strategy = \"none\"").unwrap();
    assert_eq!(c.restart.unwrap().strategy(), S::None);
    for (section, path) in [
        ("strategy = \"fixed-delay\"", "restart"),
        (
            "strategy = \"fixed-delay\"\nmax_attempts = 3\ndelya = \"1s\"",
            "restart.delya",
        ),
        (
            "strategy = \"exponential-delay\"\nmultiplier = 0.5",
            "restart.multiplier",
        ),
        (
            "strategy = \"exponential-delay\"\ninitial_delay = \"soon\"",
            "restart.initial_delay",
        ),
        (
            "strategy = \"failure-rate\"\nmax_failures = 0\ninterval = \"1m\"",
            "restart.max_failures",
        ),
        ("strategy = \"sometimes\"", "restart"),
    ] {
        let e = with_restart(section).unwrap_err();
        assert!(e.starts_with(path), "{section}: {e}");
    }
}

/// Where an error of `parse` points: a line, a field path, or the field it names.
fn located(e: &str) -> bool {
    const TOP: [&str; 8] = [
        "name",
        "parallelism",
        "checkpoint",
        "restart",
        "errors",
        "source",
        "transform",
        "sink",
    ];
    let head = e.split(':').next().unwrap_or_default();
    e.starts_with("line ")
        || TOP.iter().any(|t| head.starts_with(t))
        || e.starts_with("missing field `")
        || e.starts_with("unknown field `")
        || head
            .rsplit('.')
            .next()
            .is_some_and(|last| e.contains(&format!("unknown field `{last}`")))
}

const VALID: &str = "name = \"p\"\nparallelism = 2\n[checkpoint]\ninterval = \"1s\"\ndir = \"d\"\n\
    [restart]\nstrategy = \"fixed-delay\"\nmax_attempts = 3\n\
    [errors]\npolicy = \"dead-letter\"\ndead_letter = \"x.jsonl\"\n\
    [source]\ntype = \"generator\"\ncount = 10\n\
    [[transform]]\ntype = \"filter\"\nfield = \"status\"\nop = \"!=\"\nvalue = \"new\"\n\
    [sink]\ntype = \"jdbc\"\nurl = \"sqlite:x.db\"\ntable = \"t\"\n";

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

    #[test]
    fn any_text_is_parsed_or_refused_saying_where(text in ".{0,200}") {
        if let Err(e) = parse(&text) {
            proptest::prop_assert!(located(&e), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_damaged_file_is_refused_saying_where(
        edits in proptest::collection::vec((0usize..400, ".{0,3}"), 1..4)
    ) {
        let mut text = VALID.to_owned();
        for (at, with) in edits {
            let mut at = at % text.len();
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            let end = text[at..].chars().next().map_or(at, |c| at + c.len_utf8());
            text.replace_range(at..end, &with);
        }
        if let Err(e) = parse(&text) {
            proptest::prop_assert!(located(&e), "{text:?}: {e}");
        }
    }
}

#[test]
fn syntax_errors_name_the_line() {
    let e = parse("name = \"x\"\n[source\ntype = 1\n").unwrap_err();
    assert!(e.starts_with("line 2: "), "{e}");
    assert!(parse(VALID).is_ok(), "{:?}", parse(VALID).err());
}
