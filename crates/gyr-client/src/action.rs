//! The one text description of a steering action, as the steering log, `gyr log`, the web
//! page and the hub's replay all print it.

/// An action's text from its parts (verb, target, before, after) as `gyr.steer` events carry
/// them: tools that rebuild the log from a trace (the hub's replay) write it the same way.
pub fn describe(verb: &str, target: &str, before: &str, after: &str) -> String {
    match verb {
        "set" => format!("set {target}: {before} -> {after}"),
        "refused" => format!("refused {target} = {after}"),
        "actuate" if after.is_empty() => format!("actuate {target}({before})"),
        "actuate" => format!("actuate {target}({before}) -> {after}"),
        "call" => format!("call {target}({before})"),
        "step" => format!("step {after}"),
        _ if target.is_empty() => verb.to_owned(),
        _ => format!("{verb} {target}"),
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[test]
    fn each_verb_reads_as_the_log_prints_it() {
        assert_eq!(
            describe("set", "nbody.dt", "0.01", "0.02"),
            "set nbody.dt: 0.01 -> 0.02"
        );
        assert_eq!(
            describe("refused", "nbody.dt", "", "-1"),
            "refused nbody.dt = -1"
        );
        assert_eq!(
            describe("actuate", "heat.reset", "1", ""),
            "actuate heat.reset(1)"
        );
        assert_eq!(
            describe("actuate", "heat.f", "1", "2"),
            "actuate heat.f(1) -> 2"
        );
        assert_eq!(
            describe("call", "nbody.add_body", "1, 2", ""),
            "call nbody.add_body(1, 2)"
        );
        assert_eq!(describe("step", "", "", "5"), "step 5");
        assert_eq!(describe("pause", "", "", ""), "pause");
        assert_eq!(describe("paused", "loop", "", ""), "paused loop");
    }
}
