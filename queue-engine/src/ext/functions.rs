//! Our hottest scripts as Redis 7 functions (change 35): the grouped add, take and
//! finish run by `FCALL` from one function library, and by `EVALSHA` where the server
//! has no functions.
//!
//! Why: Redis runs a script's whole text on every `EVALSHA`, so every `local function`
//! helper of it is made anew on every call. The grouped finish is upstream's
//! `moveToFinished` (41 helpers) with our take in front (29 more), and making those 70
//! closures cost about as much as everything grouping adds to a job. A function
//! library's top level runs once, when it is loaded: as a function, the same text makes
//! its helpers once and runs only its body per call.
//!
//! How: [`library`] turns each script's text into a function of one library without
//! changing a line of its logic. What a script's top level does before its body splits
//! in two: the helper functions (and comments) run once at load; the plain
//! `local name = expression` statements among them are declared once there, so that
//! the helpers still see them, and assigned again at the start of every call, so that
//! no call sees another's values. `KEYS`, `ARGV` and `rcall` (which a library cannot
//! read from `redis` at load) are set the same way. A text of any other shape is left
//! to `EVALSHA` (the composing code's tests check that ours have this shape).
//!
//! The library's and functions' names carry a digest of its text, so that processes
//! of two versions sharing a Redis each call their own; loading is `FUNCTION LOAD
//! REPLACE` of that name (the same text again is harmless), done the first time a call
//! answers that the function is not there (a new or restarted server), once however
//! many calls were waiting. A server without functions (Redis 6, or `FCALL` renamed or
//! not allowed to the user) is remembered per connection, whose scripts then go by
//! `EVALSHA` as before.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use redis::aio::ConnectionLike;

use crate::error::Error;
use crate::scripts::{compute_sha1, script_command, LuaScript};

/// A function library built from scripts: its text and each script's function name.
#[derive(Debug)]
pub(crate) struct Library {
    pub(crate) text: String,
    /// `(script name, function name)`, for the scripts that could be made functions.
    pub(crate) functions: Vec<(String, String)>,
}

/// What the library puts around the scripts' bodies: its locals after the name line,
/// and each body's registration, whose function sets the call's `KEYS`, `ARGV` and
/// `rcall` and runs the body. Part of the digest, as the bodies are.
const LIBRARY_LOCALS: &str = "local KEYS, ARGV, rcall\n";
const REGISTER_AROUND_NAME: [&str; 2] = [
    "redis.register_function('",
    "', function(keys, args)\n  KEYS = keys\n  ARGV = args\n  rcall = redis.call\n  \
     return main()\nend)\nend\n",
];

/// The library of `sources` (`(name, text)` of each script, in the library's order),
/// with every script whose shape allows it made a function.
pub(crate) fn library(sources: &[(&str, &str)]) -> Library {
    let bodies: Vec<(&str, String)> = sources
        .iter()
        .filter_map(|(name, text)| function_body(text).map(|body| (*name, body)))
        .collect();
    let mut versioned = format!("{LIBRARY_LOCALS}{}", REGISTER_AROUND_NAME.concat());
    for (name, body) in &bodies {
        versioned.push_str(name);
        versioned.push_str(body);
    }
    let version = &compute_sha1(&versioned)[..12];
    let mut text = format!("#!lua name=queue_engine_{version}\n{LIBRARY_LOCALS}");
    let mut functions = Vec::new();
    for (name, body) in bodies {
        let function = format!("{name}_{version}");
        text.push_str("do\n");
        text.push_str(&body);
        text.push_str(REGISTER_AROUND_NAME[0]);
        text.push_str(&function);
        text.push_str(REGISTER_AROUND_NAME[1]);
        functions.push((name.to_owned(), function));
    }
    Library { text, functions }
}

/// Gives the library's scripts of a registry their function form, sharing one
/// [`LibraryState`]: the registry belongs to one connection, and so to one server.
pub(crate) fn attach(scripts: &mut HashMap<String, LuaScript>) {
    let library = crate::ext::scripts::function_library();
    let state = LibraryState::new(&library.text);
    for (script, function) in &library.functions {
        if let Some(script) = scripts.get_mut(script) {
            script.function = Some(FunctionForm::new(function, state.clone()));
        }
    }
}

/// What one top-level line of a script is, for the split.
enum Line<'a> {
    /// Kept where it is, run once at load: a comment, a blank, a helper's line.
    Once,
    /// `local name = expression` (or `local name`): declared at load, assigned per call.
    Local(&'a str, Option<&'a str>),
    /// `local rcall = redis.call`: the library's `rcall`, set per call.
    Rcall,
    /// Anything else: the start of the body, if no helper follows.
    Body,
}

/// A script's text as the inside of a library's `do … end` block, declaring a `main`
/// that runs its body; `None` when its top level has a shape the split does not
/// handle.
fn function_body(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut kinds = Vec::with_capacity(lines.len());
    let (mut in_comment, mut in_helper) = (false, false);
    // The body starts after the last helper's closing line.
    let mut body_start = 0;
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim_end();
        if in_comment {
            in_comment = !line.contains("]]");
            kinds.push(Line::Once);
        } else if in_helper {
            // A helper ends at an `end` in the first column (its inner blocks are indented).
            if line == "end" {
                in_helper = false;
                body_start = i + 1;
            }
            kinds.push(Line::Once);
        } else if line.is_empty() || line.starts_with("--") {
            in_comment = line.starts_with("--[[") && !line.contains("]]");
            kinds.push(Line::Once);
        } else if starts_helper(line) {
            if line.ends_with(" end") {
                body_start = i + 1;
            } else {
                in_helper = true;
            }
            kinds.push(Line::Once);
        } else if line == "local rcall = redis.call" {
            kinds.push(Line::Rcall);
        } else if let Some((name, value)) = plain_local(line) {
            kinds.push(Line::Local(name, value));
        } else {
            kinds.push(Line::Body);
        }
    }
    if in_comment || in_helper {
        return None;
    }
    let mut names = HashSet::new();
    let (mut once, mut per_call) = (String::new(), String::new());
    for (line, kind) in lines.iter().zip(&kinds).take(body_start) {
        match kind {
            Line::Once => {
                once.push_str(line);
                once.push('\n');
            }
            Line::Local(name, value) => {
                // A name declared twice would be one upvalue where the text has two.
                if !names.insert(*name) {
                    return None;
                }
                per_call.push_str(&format!("{name} = {}\n", value.unwrap_or("nil")));
            }
            Line::Rcall => {}
            Line::Body => return None,
        }
    }
    let mut body = String::new();
    if !names.is_empty() {
        let mut sorted: Vec<&str> = names.into_iter().collect();
        sorted.sort_unstable();
        body.push_str(&format!("local {}\n", sorted.join(", ")));
    }
    body.push_str(&once);
    body.push_str("local function main()\n");
    body.push_str(&per_call);
    for line in &lines[body_start..] {
        body.push_str(line);
        body.push('\n');
    }
    body.push_str("end\n");
    Some(body)
}

/// Whether a top-level line opens a helper: `local function f(…)` or
/// `local f = function (…)`.
fn starts_helper(line: &str) -> bool {
    if line.starts_with("local function ") {
        return true;
    }
    line.strip_prefix("local ")
        .and_then(|rest| rest.split_once(" = "))
        .is_some_and(|(name, value)| is_name(name) && value.starts_with("function"))
}

/// `local name = expression` on one line (brackets balanced), or `local name`.
fn plain_local(line: &str) -> Option<(&str, Option<&str>)> {
    let rest = line.strip_prefix("local ")?;
    if is_name(rest) {
        return Some((rest, None));
    }
    let (name, value) = rest.split_once(" = ")?;
    if !is_name(name) || value.contains("function") || !balanced(value) {
        return None;
    }
    Some((name, Some(value)))
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether an expression's brackets close on its line (strings are not looked into:
/// a bracket inside one makes the line refused, never accepted wrongly).
fn balanced(value: &str) -> bool {
    let mut depth = 0i32;
    for c in value.chars() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth -= 1,
            _ => {}
        }
        if depth < 0 {
            return false;
        }
    }
    depth == 0 && !value.trim_end().ends_with(',')
}

/// One script's function: its name in the library, and the library's state on the
/// server of one connection, shared by every script of that library.
#[derive(Debug, Clone)]
pub(crate) struct FunctionForm {
    name: Arc<str>,
    state: Arc<LibraryState>,
}

/// The library on one connection's server.
#[derive(Debug)]
pub(crate) struct LibraryState {
    text: &'static str,
    /// The server has no functions (or refuses them to us): scripts go by `EVALSHA`.
    unusable: AtomicBool,
    /// Loads so far: a call that found the function missing loads the library only if
    /// no other call loaded it since it looked.
    loads: AtomicU64,
    loading: tokio::sync::Mutex<()>,
}

impl LibraryState {
    pub(crate) fn new(text: &'static str) -> Arc<Self> {
        Arc::new(LibraryState {
            text,
            unusable: AtomicBool::new(false),
            loads: AtomicU64::new(0),
            loading: tokio::sync::Mutex::new(()),
        })
    }
}

impl FunctionForm {
    pub(crate) fn new(name: &str, state: Arc<LibraryState>) -> Self {
        FunctionForm {
            name: name.into(),
            state,
        }
    }

    /// The function's name on the server.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether calls go by `FCALL`: false once the server proved it has no functions
    /// (or refuses them to us).
    pub(crate) fn usable(&self) -> bool {
        !self.state.unusable.load(Ordering::Relaxed)
    }

    /// `FCALL` of the function; `None` when this call should go by `EVALSHA` (the
    /// server has no functions, or could not load ours just now). Loads the library
    /// first where the server does not have it. Only errors that say the function did
    /// not run lead to `EVALSHA`: a script that failed midway is never run twice.
    pub(crate) async fn call<C: ConnectionLike>(
        &self,
        conn: &mut C,
        num_keys: usize,
        keys: &[impl redis::ToRedisArgs],
        args: &[impl redis::ToRedisArgs],
    ) -> Result<Option<redis::Value>, Error> {
        if self.state.unusable.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let loads = self.state.loads.load(Ordering::Acquire);
        let fcall = script_command("FCALL", &self.name, num_keys, keys, args);
        match fcall.query_async::<redis::Value>(conn).await {
            Ok(value) => return Ok(Some(value)),
            Err(e) if missing_function(&e) => {}
            Err(e) if refused_command(&e, "fcall") => {
                self.give_up(&e);
                return Ok(None);
            }
            Err(e) => return Err(Error::Redis(e)),
        }
        if !self.load(conn, loads).await? {
            return Ok(None);
        }
        match fcall.query_async::<redis::Value>(conn).await {
            Ok(value) => Ok(Some(value)),
            // Missing again at once (flushed meanwhile, or a cluster master the load
            // did not reach): this call goes by EVALSHA, the next one loads again.
            Err(e) if missing_function(&e) => Ok(None),
            Err(e) => Err(Error::Redis(e)),
        }
    }

    /// Loads the library unless another call did since `seen` loads; `false` when this
    /// call should go by `EVALSHA`.
    async fn load<C: ConnectionLike>(&self, conn: &mut C, seen: u64) -> Result<bool, Error> {
        let _one_at_a_time = self.state.loading.lock().await;
        if self.state.unusable.load(Ordering::Relaxed) {
            return Ok(false);
        }
        if self.state.loads.load(Ordering::Acquire) != seen {
            return Ok(true);
        }
        let loaded = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(self.state.text)
            .query_async::<String>(conn)
            .await;
        match loaded {
            Ok(_) => {
                self.state.loads.fetch_add(1, Ordering::Release);
                tracing::debug!(function = %self.name, "function library loaded");
                Ok(true)
            }
            // No FUNCTION for us (before Redis 7, renamed away, not allowed to the
            // user), or a library this server cannot compile: for good.
            Err(e) if refused_command(&e, "function") || library_rejected(&e) => {
                self.give_up(&e);
                Ok(false)
            }
            // Refused for now (out of memory, a replica during a failover, a server
            // still loading its data): this call by EVALSHA, the next one tries again.
            Err(e) if e.kind() != redis::ErrorKind::Io && !e.is_timeout() => Ok(false),
            Err(e) => Err(Error::Redis(e)),
        }
    }

    fn give_up(&self, why: &redis::RedisError) {
        if !self.state.unusable.swap(true, Ordering::Relaxed) {
            tracing::info!(
                error = %why,
                "this Redis runs no functions: the grouped scripts go by EVALSHA"
            );
        }
    }
}

/// Whether an `FCALL` answered `e` without running the function: it is missing from
/// the server, or `FCALL` itself was refused. [`FunctionForm::call`] sends such a call
/// again (loading the library, or by `EVALSHA`).
pub(crate) fn did_not_run(e: &redis::RedisError) -> bool {
    missing_function(e) || refused_command(e, "fcall")
}

/// The server has functions, but not ours (a new or restarted server, or flushed).
fn missing_function(e: &redis::RedisError) -> bool {
    e.to_string().contains("Function not found")
}

/// The server refused `command` itself: unknown (before Redis 7, or renamed away) or
/// not allowed to the user. Not an error from inside a function that ran (an ACL
/// refusal of one of its commands names that command, not `command`).
fn refused_command(e: &redis::RedisError, command: &str) -> bool {
    refuses(&e.to_string(), command)
}

fn refuses(error: &str, command: &str) -> bool {
    let text = error.to_ascii_lowercase();
    text.contains(&format!("'{command}"))
        && (text.contains("unknown command") || text.contains("noperm"))
}

/// The server could not compile or register the library.
fn library_rejected(e: &redis::RedisError) -> bool {
    e.to_string().contains("Error registering functions")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_run_once_and_top_level_locals_are_set_per_call() {
        let text = "--[[ what it does ]]\nlocal rcall = redis.call\nlocal waitKey = KEYS[1]\n\
                    local jobId\nlocal function push(id)\n  rcall(\"LPUSH\", waitKey, id)\nend\n\
                    jobId = ARGV[1]\npush(jobId)\nreturn jobId\n";
        let body = function_body(text).expect("a script of the usual shape");
        assert_eq!(
            body,
            "local jobId, waitKey\n--[[ what it does ]]\nlocal function push(id)\n  \
             rcall(\"LPUSH\", waitKey, id)\nend\nlocal function main()\n\
             waitKey = KEYS[1]\njobId = nil\njobId = ARGV[1]\npush(jobId)\nreturn jobId\nend\n"
        );
    }

    #[test]
    fn a_top_level_of_another_shape_is_left_to_evalsha() {
        // A statement between helpers (it would run once, not per call).
        let between = "local function a()\nend\nredis.call(\"DEL\", KEYS[1])\n\
                       local function b()\nend\nreturn 1\n";
        assert!(function_body(between).is_none());
        // A local over several lines, and one declared twice.
        let multiline = "local t = {\n  1\n}\nlocal function a()\nend\nreturn t\n";
        assert!(function_body(multiline).is_none());
        let twice = "local x = 1\nlocal function a()\nend\nlocal x = 2\n\
                     local function b()\nend\nreturn x\n";
        assert!(function_body(twice).is_none());
        // A helper left open.
        assert!(function_body("local function a()\n  return 1\n").is_none());
    }

    #[test]
    fn only_a_refusal_of_the_command_itself_turns_functions_off() {
        // What Redis 6 and a renamed command answer, and an ACL without FCALL.
        assert!(refuses(
            "ERR unknown command 'FCALL', with args beginning with: 'groupAdd_ab' '12'",
            "fcall"
        ));
        assert!(refuses(
            "ERR unknown command 'FUNCTION', with args beginning with: 'LOAD' 'REPLACE'",
            "function"
        ));
        assert!(refuses(
            "NOPERM User worker has no permissions to run the 'fcall' command",
            "fcall"
        ));
        assert!(refuses(
            "NOPERM User worker has no permissions to run the 'function|load' command",
            "function"
        ));
        // A function that ran and failed midway: its writes happened, so it must not
        // be run again by EVALSHA.
        assert!(!refuses(
            "ERR ACL failure in script: User worker has no permissions to run the 'zadd' \
             command script: groupAdd_ab, on @user_function:12.",
            "fcall"
        ));
        assert!(!refuses(
            "The user executing the script can't run this command or subcommand script: \
             groupAdd_ab, on @user_function:196.",
            "fcall"
        ));
        assert!(!refuses(
            "ERR Unknown Redis command called from script script: groupAdd_ab",
            "fcall"
        ));
    }

    #[test]
    fn the_library_names_carry_a_digest_of_its_text() {
        let one = library(&[("s", "local function a()\nend\nreturn 1\n")]);
        let other = library(&[("s", "local function a()\nend\nreturn 2\n")]);
        assert_eq!(one.functions.len(), 1);
        assert_ne!(one.functions[0].1, other.functions[0].1);
        assert!(one.text.starts_with("#!lua name=queue_engine_"));
        assert!(one
            .text
            .contains(&format!("redis.register_function('{}'", one.functions[0].1)));
    }
}
