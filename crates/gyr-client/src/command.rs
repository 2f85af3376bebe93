//! The one command grammar of gyr's steering clients: `gyr attach` reads it at its prompt, the
//! web page sends its command line as text to the hub, which parses it here, and the CLI's
//! subcommands and the rhai bindings build their requests with the same functions, so a
//! command means the same and is refused with the same words wherever it is typed.
//!
//! ```text
//! set PATH VALUE [PATH VALUE ...]     write attributes, all or none
//! call TARGET [ARG ...]               an actuator (at the next synch point) or a function
//! pause | resume | step [N] | until CONDITION
//! sensors [TYPE|* SETTING]            SETTING: on | off | all | every N | rate R
//! ls | get PATH... | status | log [N] | watch [TYPE...] | unwatch | run FILE | help | quit
//! ```
//! Words are split as a POSIX shell would (`set app.name "two words"`).

use gyr_proto::v1;
use gyr_proto::v1::control_request::Action;
use gyr_proto::v1::sensor_control_request::Scope;
use std::fmt;

/// How long a `call` waits for the program's next synch point unless told otherwise.
pub const DEFAULT_CALL_TIMEOUT_MS: u32 = 5000;

/// The commands, their arguments and what they do: `help`, and the usage in refusals.
pub const COMMANDS: &[(&str, &str, &str)] = &[
    (
        "ls",
        "",
        "objects, attributes with values, actuators, functions",
    ),
    (
        "get",
        "PATH...",
        "read attributes (`obj.attr`, or `obj` for all)",
    ),
    ("set", "PATH VALUE...", "write attributes, all or none"),
    (
        "call",
        "TARGET ARGS...",
        "run an actuator at the next synch point, or a function",
    ),
    ("status", "", "run state and counters"),
    ("pause", "", "stall at the next synch point"),
    ("resume", "", "go on"),
    ("step", "[N]", "pass N synch points (default 1), then pause"),
    (
        "until",
        "CONDITION",
        "run until e.g. `nbody.step >= 500`, then pause",
    ),
    (
        "sensors",
        "[TYPE SETTING]",
        "list sensors, or set on|off|all|every N|rate R (TYPE `*` for all)",
    ),
    (
        "watch",
        "[TYPE...]",
        "show live events (all types, or those named)",
    ),
    ("unwatch", "", "stop showing live events"),
    ("log", "[N]", "the last N steering-log entries (default 20)"),
    ("run", "FILE", "run a steering script (rhai)"),
    ("help", "", "this list"),
    ("quit", "", "leave (the program goes on)"),
];

/// Why a command line was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// A quote opened and never closed.
    #[error("unbalanced quotes")]
    Quotes,
    /// No such command.
    #[error("unknown command `{0}` (`help` lists them)")]
    Unknown(String),
    /// The command's arguments do not fit it.
    #[error("{problem}: write `{usage}`")]
    Usage {
        /// What was wrong.
        problem: String,
        /// The command with its arguments.
        usage: String,
    },
}

fn usage(command: &str, problem: impl Into<String>) -> CommandError {
    let args = COMMANDS
        .iter()
        .find(|c| c.0 == command)
        .map(|c| c.1)
        .unwrap_or("");
    CommandError::Usage {
        problem: problem.into(),
        usage: format!("{command} {args}").trim_end().to_owned(),
    }
}

/// How a sensor records: the words after `sensors TYPE`, and `gyr sensors`' subcommands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SensorSetting {
    /// Switch on.
    On,
    /// Switch off.
    Off,
    /// Record every event (no sampling, no rate limit).
    All,
    /// Record one event in N (N ≥ 1).
    Every(u32),
    /// At most R events per second.
    Rate(f64),
}

impl SensorSetting {
    /// Reads `on`, `off`, `all`, `every N` or `rate R`.
    pub fn parse(text: &str) -> Result<SensorSetting, CommandError> {
        let bad = |problem: String| usage("sensors", problem);
        let words: Vec<&str> = text.split_whitespace().collect();
        let setting = match words.as_slice() {
            ["on"] => SensorSetting::On,
            ["off"] => SensorSetting::Off,
            ["all"] => SensorSetting::All,
            ["every", n] => SensorSetting::Every(
                n.parse()
                    .map_err(|_| bad(format!("every needs a whole number, not `{n}`")))?,
            ),
            ["rate", r] => SensorSetting::Rate(r.parse().map_err(|_| {
                bad(format!(
                    "rate needs a number of events per second, not `{r}`"
                ))
            })?),
            _ => {
                return Err(bad(format!(
                    "`{text}` is not a sensor setting: on, off, all, every N or rate R"
                )));
            }
        };
        setting.check()?;
        Ok(setting)
    }

    fn check(self) -> Result<(), CommandError> {
        match self {
            SensorSetting::Every(0) => Err(usage(
                "sensors",
                "every N needs N ≥ 1; use `all` or `on` for every event",
            )),
            SensorSetting::Rate(r) if !r.is_finite() || r < 0.0 => Err(usage(
                "sensors",
                format!("rate R needs R ≥ 0 events per second, not {r}"),
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for SensorSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SensorSetting::On => f.write_str("on"),
            SensorSetting::Off => f.write_str("off"),
            SensorSetting::All => f.write_str("all"),
            SensorSetting::Every(n) => write!(f, "every {n}"),
            SensorSetting::Rate(r) => write!(f, "rate {r}"),
        }
    }
}

/// Which sensors a setting applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SensorScope {
    /// Every sensor (`*`).
    All,
    /// Every sensor of one event type.
    Type(String),
    /// One registered instance.
    Instance(String),
}

impl SensorScope {
    /// `*` is every sensor, any other word an event type.
    pub fn from_word(word: &str) -> SensorScope {
        if word == "*" || word.is_empty() {
            SensorScope::All
        } else {
            SensorScope::Type(word.to_owned())
        }
    }
}

impl fmt::Display for SensorScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SensorScope::All => f.write_str("all sensors"),
            SensorScope::Type(t) => f.write_str(t),
            SensorScope::Instance(i) => write!(f, "instance {i}"),
        }
    }
}

/// The request that applies `setting` to the sensors of `scope`.
pub fn sensor_request(
    scope: &SensorScope,
    setting: SensorSetting,
) -> Result<v1::SensorControlRequest, CommandError> {
    setting.check()?;
    let (scope, name) = match scope {
        SensorScope::All => (Scope::Global, String::new()),
        SensorScope::Type(t) => (Scope::Type, t.clone()),
        SensorScope::Instance(i) => (Scope::Instance, i.clone()),
    };
    let mut req = v1::SensorControlRequest {
        scope: scope as i32,
        name,
        ..Default::default()
    };
    match setting {
        SensorSetting::On => req.enabled = Some(true),
        SensorSetting::Off => req.enabled = Some(false),
        SensorSetting::All => req.every_nth = Some(1),
        SensorSetting::Every(n) => req.every_nth = Some(n),
        SensorSetting::Rate(r) => req.per_second = Some(r),
    }
    Ok(req)
}

/// The request that writes `PATH VALUE` pairs, all or none; values are text the program parses
/// as each attribute's type.
pub fn set_request(pairs: &[String]) -> Result<v1::SetRequest, CommandError> {
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(usage(
            "set",
            "give attribute and value in pairs: object.attribute VALUE [object.attribute VALUE ...]",
        ));
    }
    Ok(v1::SetRequest {
        writes: pairs
            .chunks(2)
            .map(|p| v1::PathValue {
                path: p[0].clone(),
                value: Some(v1::Value::text(p[1].clone())),
            })
            .collect(),
    })
}

/// The request that runs an actuator or function with arguments given as text.
pub fn call_request(target: &str, args: &[String], timeout_ms: u32) -> v1::CallRequest {
    v1::CallRequest {
        target: target.to_owned(),
        args: args.iter().cloned().map(v1::Value::text).collect(),
        timeout_ms,
    }
}

/// A control request with no arguments (pause, resume).
pub fn control_request(action: Action) -> v1::ControlRequest {
    v1::ControlRequest {
        action: action as i32,
        ..Default::default()
    }
}

/// The request that lets a paused program pass `n` synch points (n ≥ 1).
pub fn step_request(n: u64) -> Result<v1::ControlRequest, CommandError> {
    if n == 0 {
        return Err(usage(
            "step",
            "step needs a number of synch points of 1 or more; `pause` stops at the next one",
        ));
    }
    Ok(v1::ControlRequest {
        steps: n,
        ..control_request(Action::Step)
    })
}

/// The request that runs the program until `condition` holds at a synch point.
pub fn until_request(condition: &str) -> Result<v1::ControlRequest, CommandError> {
    if condition.trim().is_empty() {
        return Err(usage("until", "until needs a condition"));
    }
    Ok(v1::ControlRequest {
        until: condition.to_owned(),
        ..control_request(Action::RunUntil)
    })
}

/// One command of the grammar.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `ls`.
    Ls,
    /// `get PATH...`.
    Get(Vec<String>),
    /// `status`.
    Status,
    /// `log [N]`.
    Log(usize),
    /// A change to the program: set, call, pause, resume, step, until, sensors with a setting.
    Steer(SteerCommand),
    /// `sensors` alone: list them.
    ListSensors,
    /// `watch [TYPE...]`.
    Watch(Vec<String>),
    /// `unwatch`.
    Unwatch,
    /// `run FILE`.
    Run(String),
    /// `help`.
    Help,
    /// `quit`.
    Quit,
}

/// A command that changes the program, with the request that does it.
#[derive(Debug, Clone, PartialEq)]
pub enum SteerCommand {
    /// `set PATH VALUE...`.
    Set(v1::SetRequest),
    /// `call TARGET ARGS...`.
    Call(v1::CallRequest),
    /// `pause`, `resume`, `step [N]`, `until CONDITION`.
    Control(v1::ControlRequest),
    /// `sensors TYPE SETTING`.
    Sensors {
        /// The request.
        request: v1::SensorControlRequest,
        /// What it applies to and how, for the reply: `energy every 10`.
        label: String,
    },
}

impl Command {
    /// Parses one command line; `Ok(None)` for an empty one.
    pub fn parse_line(line: &str) -> Result<Option<Command>, CommandError> {
        let words = shlex::split(line.trim()).ok_or(CommandError::Quotes)?;
        if words.is_empty() {
            return Ok(None);
        }
        Command::parse(&words).map(Some)
    }

    /// Parses a command split into words (the first is the command).
    pub fn parse(words: &[String]) -> Result<Command, CommandError> {
        let Some((cmd, args)) = words.split_first() else {
            return Err(CommandError::Unknown(String::new()));
        };
        let cmd = cmd.as_str();
        let count = |what: &str, n: &str| -> Result<u64, CommandError> {
            n.parse()
                .map_err(|_| usage(cmd, format!("`{n}` is not a number of {what}")))
        };
        Ok(match (cmd, args) {
            ("ls", []) => Command::Ls,
            ("get", [_, ..]) => Command::Get(args.to_vec()),
            ("status", []) => Command::Status,
            ("log", []) => Command::Log(20),
            ("log", [n]) => Command::Log(count("entries", n)? as usize),
            ("set", _) => Command::Steer(SteerCommand::Set(set_request(args)?)),
            ("call", [target, rest @ ..]) => Command::Steer(SteerCommand::Call(call_request(
                target,
                rest,
                DEFAULT_CALL_TIMEOUT_MS,
            ))),
            ("pause", []) => Command::Steer(SteerCommand::Control(control_request(Action::Pause))),
            ("resume", []) => {
                Command::Steer(SteerCommand::Control(control_request(Action::Resume)))
            }
            ("step", []) => Command::Steer(SteerCommand::Control(step_request(1)?)),
            ("step", [n]) => {
                Command::Steer(SteerCommand::Control(step_request(count("steps", n)?)?))
            }
            ("until", [_, ..]) => {
                Command::Steer(SteerCommand::Control(until_request(&args.join(" "))?))
            }
            ("sensors", []) => Command::ListSensors,
            ("sensors", [ty, setting @ ..]) if !setting.is_empty() => {
                let setting = SensorSetting::parse(&setting.join(" "))?;
                let scope = SensorScope::from_word(ty);
                Command::Steer(SteerCommand::Sensors {
                    request: sensor_request(&scope, setting)?,
                    label: format!("{scope} {setting}"),
                })
            }
            ("watch", _) => Command::Watch(args.to_vec()),
            ("unwatch", []) => Command::Unwatch,
            ("run", [file]) => Command::Run(file.clone()),
            ("help" | "?", []) => Command::Help,
            ("quit" | "exit" | "q", []) => Command::Quit,
            _ if COMMANDS.iter().any(|c| c.0 == cmd) => {
                return Err(usage(cmd, format!("`{cmd}` takes other arguments")));
            }
            _ => return Err(CommandError::Unknown(cmd.to_owned())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Command, CommandError> {
        Command::parse_line(line).map(|c| c.expect("a command"))
    }

    #[test]
    fn every_command_reads_into_its_request() {
        match parse("set nbody.dt 0.02 nbody.softening \"1e-3\"").unwrap() {
            Command::Steer(SteerCommand::Set(r)) => {
                assert_eq!(r.writes.len(), 2);
                assert_eq!(r.writes[1].path, "nbody.softening");
                assert_eq!(r.writes[1].value, Some(v1::Value::text("1e-3")));
            }
            other => panic!("{other:?}"),
        }
        match parse("call nbody.add_body 1 -2 'a b'").unwrap() {
            Command::Steer(SteerCommand::Call(r)) => {
                assert_eq!(r.target, "nbody.add_body");
                assert_eq!(r.args[2], v1::Value::text("a b"));
                assert_eq!(r.timeout_ms, DEFAULT_CALL_TIMEOUT_MS);
            }
            other => panic!("{other:?}"),
        }
        match parse("step 5").unwrap() {
            Command::Steer(SteerCommand::Control(r)) => {
                assert_eq!((r.action, r.steps), (Action::Step as i32, 5));
            }
            other => panic!("{other:?}"),
        }
        match parse("until nbody.step >= 500 and nbody.energy < 0").unwrap() {
            Command::Steer(SteerCommand::Control(r)) => {
                assert_eq!(r.until, "nbody.step >= 500 and nbody.energy < 0");
            }
            other => panic!("{other:?}"),
        }
        match parse("sensors energy every 10").unwrap() {
            Command::Steer(SteerCommand::Sensors { request, label }) => {
                assert_eq!(request.scope, Scope::Type as i32);
                assert_eq!(request.every_nth, Some(10));
                assert_eq!(label, "energy every 10");
            }
            other => panic!("{other:?}"),
        }
        match parse("sensors * rate 2.5").unwrap() {
            Command::Steer(SteerCommand::Sensors { request, label }) => {
                assert_eq!(request.scope, Scope::Global as i32);
                assert_eq!(request.per_second, Some(2.5));
                assert_eq!(label, "all sensors rate 2.5");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse("sensors").unwrap(), Command::ListSensors);
        assert_eq!(parse("log 5").unwrap(), Command::Log(5));
        assert_eq!(
            parse("watch a b").unwrap(),
            Command::Watch(vec!["a".into(), "b".into()])
        );
        assert_eq!(Command::parse_line("   ").unwrap(), None);
    }

    #[test]
    fn mistakes_are_refused_with_the_usage() {
        let e = parse("set nbody.dt").unwrap_err().to_string();
        assert!(
            e.contains("in pairs") && e.contains("write `set PATH VALUE...`"),
            "{e}"
        );
        let e = parse("step 0").unwrap_err().to_string();
        assert!(e.contains("1 or more"), "{e}");
        let e = parse("step many").unwrap_err().to_string();
        assert!(e.contains("`many` is not a number of steps"), "{e}");
        let e = parse("sensors energy every 0").unwrap_err().to_string();
        assert!(e.contains("use `all` or `on`"), "{e}");
        let e = parse("sensors energy every x").unwrap_err().to_string();
        assert!(e.contains("whole number"), "{e}");
        let e = parse("sensors energy rate -1").unwrap_err().to_string();
        assert!(e.contains("R ≥ 0"), "{e}");
        let e = parse("sensors energy sometimes").unwrap_err().to_string();
        assert!(e.contains("not a sensor setting"), "{e}");
        assert_eq!(
            parse("frobnicate").unwrap_err(),
            CommandError::Unknown("frobnicate".into())
        );
        assert_eq!(parse("set a \"b").unwrap_err(), CommandError::Quotes);
        assert!(
            parse("call")
                .unwrap_err()
                .to_string()
                .contains("call TARGET ARGS...")
        );
        assert!(parse("ls extra").is_err());
    }

    #[test]
    fn settings_print_as_they_are_written() {
        for s in ["on", "off", "all", "every 3", "rate 0.5"] {
            assert_eq!(SensorSetting::parse(s).unwrap().to_string(), s);
        }
    }
}
