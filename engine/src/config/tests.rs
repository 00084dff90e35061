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
    use rivus_sdk::RestartStrategy as S;
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

/// Two sources, a router and three sinks, as named components.
const GRAPH: &str = "name = \"g\"\n\
    [sources.orders]\ntype = \"generator\"\ncount = 10\n\
    [sources.more]\ntype = \"generator\"\ncount = 5\n\
    [transforms.split]\ntype = \"route\"\ninputs = [\"orders\", \"more\"]\n\
    route.big = { field = \"amount\", op = \">\", value = 100 }\n\
    route.paid = { field = \"status\", op = \"==\", value = \"PAID\" }\n\
    [transforms.tidy]\ntype = \"drop\"\ninputs = [\"split.big\"]\nfields = [\"ts\"]\n\
    [sinks.large]\ntype = \"stdout\"\ninputs = [\"tidy\"]\n\
    [sinks.paid]\ntype = \"stdout\"\ninputs = [\"split.paid\", \"split._unmatched\"]\n\
    [sinks.paid.errors]\npolicy = \"skip\"\n\
    [sinks.all]\ntype = \"stdout\"\ninputs = [\"orders\"]\n";

#[test]
fn named_components_make_a_graph() {
    let c = parse(GRAPH).unwrap();
    let g = &c.graph;
    let names = |v: Vec<&str>| v.join(",");
    assert_eq!(
        names(g.sources.iter().map(|s| s.name.as_str()).collect()),
        "more,orders"
    );
    assert_eq!(
        names(g.sinks.iter().map(|s| s.name.as_str()).collect()),
        "all,large,paid"
    );
    assert_eq!(g.sinks[2].section.path, "sinks.paid");
    assert_eq!(
        g.sinks[2].errors.as_ref().map(|e| e.policy),
        Some(PolicyName::Skip)
    );
    let readers = g.readers();
    let orders = graph::Output {
        component: "orders".into(),
        route: None,
    };
    assert_eq!(readers[&orders], ["split", "all"], "orders fans out");
    let order: Vec<&str> = g
        .transform_order()
        .unwrap()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(order, ["split", "tidy"]);
    let text = g.describe();
    assert!(
        text.contains("transforms.split (route: big, paid) <- orders, more"),
        "{text}"
    );
    assert!(
        text.contains("sinks.paid (stdout) <- split.paid, split._unmatched"),
        "{text}"
    );
}

#[test]
fn graph_refusals_name_the_component() {
    let cases: [(&str, &str, &str); 9] = [
        (
            "inputs = [\"tidy\"]",
            "inputs = [\"tdy\"]",
            "sinks.large.inputs[0]: no component named \"tdy\"",
        ),
        (
            "inputs = [\"split.big\"]",
            "inputs = [\"split.huge\"]",
            "transforms.tidy.inputs[0]: router \"split\" has no route \"huge\" (it has big, paid)",
        ),
        (
            "inputs = [\"split.big\"]",
            "inputs = [\"split\"]",
            "transforms.tidy.inputs[0]: \"split\" is a router: name one of its routes",
        ),
        (
            "inputs = [\"split.big\"]",
            "inputs = [\"large\"]",
            "transforms.tidy.inputs[0]: \"large\" is a sink",
        ),
        (
            "inputs = [\"orders\"]\n",
            "inputs = []\n",
            "sinks.all.inputs: empty",
        ),
        (
            "inputs = [\"split.big\"]",
            "inputs = [\"split.big\", \"tidy\"]",
            "transforms.tidy.inputs: a cycle among transforms tidy",
        ),
        (
            "[sinks.all]\ntype = \"stdout\"\ninputs = [\"orders\"]\n",
            "",
            "sources.more: its records go nowhere",
        ),
        (
            "inputs = [\"split.paid\", \"split._unmatched\"]",
            "inputs = [\"split._unmatched\"]",
            "transforms.split.route.paid: nothing reads \"split.paid\"",
        ),
        (
            "[sinks.large]\ntype = \"stdout\"",
            "[sinks.more]\ntype = \"stdout\"",
            "sinks.more: the name is taken by sources.more",
        ),
    ];
    for (from, to, want) in cases {
        assert!(GRAPH.contains(from), "{from}");
        let file = GRAPH.replacen(from, to, 1);
        // Without `all`, `orders` is read by the router alone and `more` stays read.
        let file = if to.is_empty() {
            file.replace("inputs = [\"orders\", \"more\"]", "inputs = [\"orders\"]")
        } else {
            file
        };
        let e = parse(&file).unwrap_err();
        assert!(e.contains(want), "want `{want}`, got `{e}`");
    }
    let e = parse(&format!("{GRAPH}[sink]\ntype = \"stdout\"\n")).unwrap_err();
    assert!(e.contains("not both"), "{e}");
    let e = parse(&GRAPH.replace(
        "[sinks.paid.errors]\npolicy = \"skip\"\n",
        "[sinks.paid.errors]\npolicy = \"dead-letter\"\n",
    ))
    .unwrap_err();
    assert!(e.starts_with("sinks.paid.errors.dead_letter:"), "{e}");
    let e =
        parse(&GRAPH.replace("fields = [\"ts\"]", "fields = [\"ts\"]\nfeilds = 1")).unwrap_err();
    assert!(e.starts_with("transforms.tidy"), "{e}");
    assert!(e.contains("feilds"), "{e}");
    let e = parse(&GRAPH.replace("value = \"PAID\" }", "}")).unwrap_err();
    assert_eq!(
        e,
        "transforms.split.route.paid.value: this comparison needs a value"
    );
}

#[test]
fn sources_carry_metadata_only_when_something_reads_it() {
    let file = |transform: &str, sink: &str| {
        format!(
            "name = \"m\"\n[sources.in]\ntype = \"generator\"\n\
             [transforms.t]\ninputs = [\"in\"]\n{transform}\n\
             [sinks.out]\ninputs = [\"t\"]\n{sink}\n"
        )
    };
    let stdout = "type = \"stdout\"";
    let kafka = |topic: &str, key: &str| {
        format!(
            "type = \"kafka\"\nbootstrap_servers = \"127.0.0.1:1\"\ntopic = \"{topic}\"\n\
             key_field = \"{key}\""
        )
    };
    let reads = |t: &str, s: &str| {
        let c = parse(&file(t, s)).unwrap();
        (
            c.graph.reads_metadata(),
            c.context(rivus_sdk::error_policy::ErrorPolicy::Fail, true)
                .metadata,
        )
    };
    let plain = "type = \"rename\"\nfields = { a = \"b\" }";
    assert_eq!(reads(plain, stdout), (false, false));
    assert_eq!(reads(plain, &kafka("out", "id")), (false, false));
    assert_eq!(reads(plain, &kafka("c.{%kafka.topic}", "id")), (true, true));
    assert_eq!(reads(plain, &kafka("out", "%kafka.key")), (true, true));
    #[cfg(feature = "vrl")]
    {
        assert!(!reads("type = \"remap\"\nsource = \".a = 1\"", stdout).0);
        assert!(reads("type = \"remap\"\nsource = \".t = %kafka.topic\"", stdout).0);
        assert!(
            reads(
                "type = \"filter\"\ncondition = \"%kafka.offset == 1\"",
                stdout
            )
            .0
        );
    }
    assert!(
        reads(
            "type = \"filter\"\nfield = \"%kafka.topic\"\nop = \"exists\"",
            stdout
        )
        .0
    );
    assert!(reads("type = \"key\"\nfield = \"%kafka.key\"", stdout).0);
}
