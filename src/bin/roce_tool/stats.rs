//! `roce-tool stats`: the counters of a running dpdk-roce process, read from its DPDK telemetry
//! socket (`<runtime dir>/<file prefix>/dpdk_telemetry.v2`, the socket Debian's
//! `dpdk-telemetry.py -f <file prefix>` reads; the commands are `dpdk_roce::dat::telemetry`'s).
//!
//! ```text
//! roce-tool stats                          # the one running dpdk-roce process: every command
//! roce-tool stats --file-prefix af_packet-a-4242 /roce/net
//! roce-tool stats --watch 2 /roce/qp,0x1a2b3c
//! ```
//!
//! Without `--file-prefix` it looks for processes under the runtime directory whose telemetry
//! has the `/roce/port` command: with exactly one it reads that one, with several it lists them
//! (prefix, pid, program) and asks for one. Without a command it prints `/roce/port`,
//! `/roce/net`, `/roce/cm` and each QP's `/roce/qp` (the first 64 QPs, read page by page from
//! `/roce/qps`, with a line saying how many more there are), counters that are zero left out
//! below the device level; with a command, that command's whole answer (`--json`: as the
//! socket gave it).
//!
//! `--watch N` prints again every N seconds; from the second sample on, every counter that
//! changed since the previous sample has its rate per second beside it (over the time between
//! the two samples), e.g. `rx_frames: 123456 (+40125/s)`; the first sample has totals only
//! (`--json` too).
//!
//! The socket is SOCK_SEQPACKET: one message per command and per answer. On connect the server
//! first sends `{"version": ..., "pid": ..., "max_output_len": ...}`.

use clap::Args;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use socket2::{Domain, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The telemetry socket's name in a runtime directory (DPDK 22.11, version 2 protocol).
const SOCKET: &str = "dpdk_telemetry.v2";
/// The command every process with the provider's counters answers.
const MARKER: &str = "/roce/port";
/// The commands printed when none is given (`/roce/qp` for each QP after them).
const OVERVIEW: [&str; 3] = ["/roce/port", "/roce/net", "/roce/cm"];
/// QPs printed in the overview at most.
const MAX_QPS: usize = 64;

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The EAL file prefix of the process (`eal.file_prefix`, by default `<profile name>-<pid>`).
    #[arg(long, short = 'f')]
    file_prefix: Option<String>,
    /// Print again every SECONDS seconds until interrupted.
    #[arg(long, value_name = "SECONDS")]
    watch: Option<u64>,
    /// Print the answer as JSON, as the socket gave it.
    #[arg(long)]
    json: bool,
    /// One command, e.g. `/roce/net` or `/roce/qp,17` (default: all of the provider's).
    command: Option<String>,
}

pub fn run(args: &StatsArgs) -> ExitCode {
    match stats(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce-tool stats: {e}");
            ExitCode::from(2)
        }
    }
}

fn stats(args: &StatsArgs) -> Result<(), String> {
    let base = dpdk_roce::dpdk::runtime_base();
    let prefix = match &args.file_prefix {
        Some(p) => p.clone(),
        None => only_process(&base)?,
    };
    let path = base.join(&prefix).join(SOCKET);
    let mut client = Client::connect(&path)?;
    // The previous sample's counters and when it was read (`--watch`).
    let mut previous: Option<(Counters, Instant)> = None;
    loop {
        let at = Instant::now();
        let mut sample = Sample::new(
            previous
                .as_ref()
                .map(|(c, t)| (c, at.duration_since(*t).as_secs_f64())),
        );
        if args.watch.is_some() {
            let _ = writeln!(sample.out, "== {prefix} (pid {}) ==", client.pid);
        }
        match &args.command {
            Some(c) if args.json => {
                sample.out.push_str(&client.raw(c)?);
                sample.out.push('\n');
            }
            Some(c) => sample.answer(c, &client.call(c)?, false),
            None => overview(&mut sample, &mut client)?,
        }
        let Sample { out, counters, .. } = sample;
        previous = Some((counters, at));
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush())
        {
            // The reader went away (`roce-tool stats --watch 1 | head`): done.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(format!("standard output: {e}")),
            Ok(()) => {}
        }
        drop(stdout);
        match args.watch {
            Some(s) => std::thread::sleep(Duration::from_secs(s.max(1))),
            None => return Ok(()),
        }
    }
}

/// Every command of the provider, QPs last.
fn overview(sample: &mut Sample, client: &mut Client) -> Result<(), String> {
    for c in OVERVIEW {
        sample.answer(c, &client.call(c)?, true);
    }
    let qpns = all_qpns(client)?;
    if qpns.is_empty() {
        let _ = writeln!(sample.out, "/roce/qps: no QP");
    }
    for &qpn in qpns.iter().take(MAX_QPS) {
        let c = format!("/roce/qp,{qpn}");
        sample.answer(&c, &client.call(&c)?, true);
    }
    if qpns.len() > MAX_QPS {
        let _ = writeln!(
            sample.out,
            "({} more QPs: roce-tool stats /roce/qp,<qpn>)",
            qpns.len() - MAX_QPS
        );
    }
    Ok(())
}

/// Every QPN of every device, read page by page: `/roce/qps,<from>` answers per device at most
/// a page of its QPNs `>= from` and the `next` QPN to ask from; each device is followed from
/// its own `next` until a page of it has none.
fn all_qpns(client: &mut Client) -> Result<Vec<u64>, String> {
    // Per device: where its next page starts (`None`: all read), and its QPNs so far.
    let mut devices: Vec<(String, Option<u64>, Vec<u64>)> = Vec::new();
    let mut from = 0;
    loop {
        let command = format!("/roce/qps,{from}");
        let Node::Dict(answer) = client.call(&command)? else {
            return Err(format!("{command}: not a dictionary of devices"));
        };
        for (name, page) in answer {
            let i = match devices.iter().position(|d| d.0 == name) {
                Some(i) => i,
                None if from == 0 => {
                    devices.push((name, Some(0), Vec::new()));
                    devices.len() - 1
                }
                // A device opened since the first page: the next overview lists it.
                None => continue,
            };
            let (_, cursor, qpns) = &mut devices[i];
            let Some(at) = *cursor else { continue };
            let field = |k: &str| match &page {
                Node::Dict(d) => d.iter().find(|(n, _)| n == k).map(|(_, v)| v),
                _ => None,
            };
            if let Some(Node::List(l)) = field("qpns") {
                qpns.extend(l.iter().filter_map(Node::as_u64).filter(|&n| n >= at));
            }
            // The page held the QPNs from `from` up to `next`: those from `at` are taken. One
            // that ended before `at` (another device's page was asked for) is asked again.
            match field("next").and_then(Node::as_u64) {
                None => *cursor = None,
                Some(n) if n > at => *cursor = Some(n),
                Some(_) => {}
            }
        }
        // A device still at `from` did not move on (gone since the first page, or a `next` not
        // beyond its page): done, so that every round moves on.
        for d in &mut devices {
            if d.1 == Some(from) {
                d.1 = None;
            }
        }
        match devices.iter().filter_map(|d| d.1).min() {
            Some(next) => from = next,
            None => break,
        }
    }
    Ok(devices.into_iter().flat_map(|d| d.2).collect())
}

/// The file prefix of the one running process with the provider's telemetry under `base`.
fn only_process(base: &Path) -> Result<String, String> {
    let entries = std::fs::read_dir(base).map_err(|e| {
        format!(
            "no DPDK runtime directory {} ({e}): is a dpdk-roce process running?",
            base.display()
        )
    })?;
    let mut found = Vec::new();
    for e in entries.flatten() {
        let prefix = e.file_name().to_string_lossy().into_owned();
        let path = e.path().join(SOCKET);
        if !path.exists() {
            continue;
        }
        // A killed process leaves its socket: only one that answers counts.
        let Ok(mut c) = Client::connect(&path) else {
            continue;
        };
        if let Ok(Node::List(cmds)) = c.call("/") {
            if cmds.iter().any(|n| n.as_str() == Some(MARKER)) {
                found.push((prefix, c.pid));
            }
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0).0),
        0 => Err(format!(
            "no running dpdk-roce process with telemetry under {} (one that opened an IA, \
             telemetry on)",
            base.display()
        )),
        _ => {
            let mut msg =
                String::from("several dpdk-roce processes; say which with --file-prefix:\n");
            for (prefix, pid) in &found {
                let _ = writeln!(msg, "  {prefix}  (pid {pid}, {})", program(*pid));
            }
            Err(msg.trim_end().to_owned())
        }
    }
}

/// The program name of `pid`, from /proc.
fn program(pid: u64) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|c| {
            let argv0 = c.split(|&b| b == 0).next()?.to_vec();
            let name = PathBuf::from(String::from_utf8_lossy(&argv0).into_owned());
            Some(name.file_name()?.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "?".into())
}

/// A connection to one telemetry socket.
struct Client {
    sock: Socket,
    pid: u64,
    max_output: usize,
}

impl Client {
    fn connect(path: &Path) -> Result<Client, String> {
        let fail = |e: std::io::Error| format!("{}: {e}", path.display());
        let sock = Socket::new(Domain::UNIX, Type::SEQPACKET, None).map_err(fail)?;
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(fail)?;
        sock.connect(&SockAddr::unix(path).map_err(fail)?)
            .map_err(fail)?;
        let mut c = Client {
            sock,
            pid: 0,
            max_output: 16 * 1024,
        };
        let greeting = c.read().map_err(|e| format!("{}: {e}", path.display()))?;
        let Ok(Node::Dict(g)) = serde_json::from_str::<Node>(&greeting) else {
            return Err(format!(
                "{}: not a DPDK telemetry greeting: {greeting}",
                path.display()
            ));
        };
        let field = |k: &str| g.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.as_u64());
        c.pid = field("pid").unwrap_or(0);
        c.max_output = field("max_output_len").map_or(c.max_output, |n| n as usize);
        Ok(c)
    }

    fn read(&mut self) -> Result<String, String> {
        let mut buf = vec![0u8; self.max_output.max(1024) + 1];
        let n = self.sock.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the process closed the connection".into());
        }
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// The answer of `command` as the socket gave it.
    fn raw(&mut self, command: &str) -> Result<String, String> {
        self.sock
            .write_all(command.as_bytes())
            .map_err(|e| format!("sending {command}: {e} (has the process gone?)"))?;
        self.read()
    }

    /// The answer of `command`: the value under the command's name.
    fn call(&mut self, command: &str) -> Result<Node, String> {
        let text = self.raw(command)?;
        let reply: Node =
            serde_json::from_str(&text).map_err(|e| format!("{command}: {e}: {text}"))?;
        match reply {
            Node::Dict(mut d) if d.len() == 1 => Ok(d.remove(0).1),
            _ => Err(format!("{command}: unexpected answer {text}")),
        }
    }
}

/// A JSON value with its objects' keys in the order the process wrote them.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    Num(serde_json::Number),
    Str(String),
    List(Vec<Node>),
    Dict(Vec<(String, Node)>),
}

impl Node {
    fn as_u64(&self) -> Option<u64> {
        match self {
            Node::Num(n) => n.as_u64(),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    fn is_zero(&self) -> bool {
        self.as_u64() == Some(0)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Node, E> {
                Ok(Node::Bool(b))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Node, E> {
                Ok(Node::Num(n.into()))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Node, E> {
                Ok(Node::Num(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Node, E> {
                Ok(serde_json::Number::from_f64(n).map_or(Node::Null, Node::Num))
            }
            fn visit_str<E>(self, s: &str) -> Result<Node, E> {
                Ok(Node::Str(s.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut v = Vec::new();
                while let Some(n) = a.next_element()? {
                    v.push(n);
                }
                Ok(Node::List(v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut v = Vec::new();
                while let Some((k, n)) = a.next_entry()? {
                    v.push((k, n));
                }
                Ok(Node::Dict(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// Every number of a sample, by path: the command, then the keys down to it
/// (`/roce/net/net_af_packet0/drops/runt`).
type Counters = HashMap<String, u64>;

/// One printing of answers: the text, and the counters it showed, to rate the next sample of
/// `--watch` against.
struct Sample<'a> {
    out: String,
    counters: Counters,
    /// The previous sample's counters and the seconds since it (none on the first sample).
    before: Option<(&'a Counters, f64)>,
}

impl<'a> Sample<'a> {
    fn new(before: Option<(&'a Counters, f64)>) -> Sample<'a> {
        Sample {
            out: String::new(),
            counters: Counters::new(),
            before,
        }
    }

    /// `command`'s answer as indented `key: value` lines (a counter that changed since the
    /// previous sample with its rate: `key: value (+rate/s)`); `terse` leaves out zero
    /// counters below the device level.
    fn answer(&mut self, command: &str, answer: &Node, terse: bool) {
        let _ = writeln!(self.out, "{command}:");
        match answer {
            Node::Null => {
                let _ = writeln!(
                    self.out,
                    "  (no answer: unknown command, or a bad parameter)"
                );
            }
            Node::Dict(d) if d.is_empty() => {
                let _ = writeln!(self.out, "  (no device open)");
            }
            n => self.node(command, n, 1, terse),
        }
    }

    fn node(&mut self, path: &str, n: &Node, depth: usize, terse: bool) {
        let pad = "  ".repeat(depth);
        let Node::Dict(d) = n else {
            let _ = writeln!(self.out, "{pad}{}", scalar(n));
            return;
        };
        for (k, v) in d {
            let at = format!("{path}/{k}");
            match v {
                Node::Dict(inner) => {
                    let shown: Vec<&(String, Node)> = inner
                        .iter()
                        .filter(|(_, x)| !(terse && depth >= 2 && x.is_zero()))
                        .collect();
                    if shown.is_empty() && terse && depth >= 1 {
                        let _ = writeln!(self.out, "{pad}{k}: all 0");
                        continue;
                    }
                    let _ = writeln!(self.out, "{pad}{k}:");
                    let shown = Node::Dict(shown.into_iter().cloned().collect());
                    self.node(&at, &shown, depth + 1, terse);
                }
                other => {
                    if terse && depth >= 2 && other.is_zero() {
                        continue;
                    }
                    let _ = write!(self.out, "{pad}{k}: {}", scalar(other));
                    if let Some(now) = other.as_u64() {
                        if let Some(r) = self.rate(&at, now) {
                            let _ = write!(self.out, " ({r}/s)");
                        }
                        self.counters.insert(at, now);
                    }
                    self.out.push('\n');
                }
            }
        }
    }

    /// The rate of the counter at `path`, now `now`, since the previous sample, when it changed.
    fn rate(&self, path: &str, now: u64) -> Option<String> {
        let (before, secs) = self.before?;
        let was = *before.get(path)?;
        if was == now || secs <= 0.0 {
            return None;
        }
        let r = (now as f64 - was as f64) / secs;
        // Whole numbers when large or whole; one decimal for slow counters.
        Some(if r.abs() >= 10.0 || (r - r.round()).abs() < 0.05 {
            format!("{r:+.0}")
        } else {
            format!("{r:+.1}")
        })
    }
}

fn scalar(n: &Node) -> String {
    match n {
        Node::Null => "null".into(),
        Node::Bool(b) => b.to_string(),
        Node::Num(x) => x.to_string(),
        Node::Str(s) if s.is_empty() => "-".into(),
        Node::Str(s) => s.clone(),
        Node::List(l) if l.is_empty() => "(none)".into(),
        Node::List(l) => l.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Node::Dict(_) => "{...}".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_keep_their_order_and_print_as_indented_lines() {
        let text = r#"{"/roce/net": {"net_af_packet0": {"rx_frames": 12, "dropped": 0,
            "drops": {"runt": 0, "not_our_mac": 3}, "arp": {"a": 0}}}}"#;
        let Node::Dict(reply) = serde_json::from_str::<Node>(text).unwrap() else {
            panic!()
        };
        let (cmd, answer) = &reply[0];
        let mut full = Sample::new(None);
        full.answer(cmd, answer, false);
        assert_eq!(
            full.out,
            "/roce/net:\n  net_af_packet0:\n    rx_frames: 12\n    dropped: 0\n    drops:\n      \
             runt: 0\n      not_our_mac: 3\n    arp:\n      a: 0\n"
        );
        let mut terse = Sample::new(None);
        terse.answer(cmd, answer, true);
        assert_eq!(
            terse.out,
            "/roce/net:\n  net_af_packet0:\n    rx_frames: 12\n    drops:\n      \
             not_our_mac: 3\n    arp: all 0\n"
        );
    }

    /// `--watch`: the second sample has, beside each counter that changed, its rate over the
    /// seconds between the samples; the first has totals only.
    #[test]
    fn a_second_sample_shows_the_rate_of_each_counter_that_changed() {
        let parse = |t: &str| serde_json::from_str::<Node>(t).unwrap();
        let first = parse(
            r#"{"net_af_packet0": {"rx_frames": 100, "dropped": 5, "tx": 7,
                "drops": {"runt": 1, "bad_icrc": 0}, "state": "RTS"}}"#,
        );
        let second = parse(
            r#"{"net_af_packet0": {"rx_frames": 80350, "dropped": 5, "tx": 6,
                "drops": {"runt": 2, "bad_icrc": 0}, "state": "RTS"}}"#,
        );
        let mut one = Sample::new(None);
        one.answer("/roce/net", &first, false);
        assert!(
            !one.out.contains("/s)"),
            "first sample: totals only\n{}",
            one.out
        );
        let before = one.counters;
        assert_eq!(before.get("/roce/net/net_af_packet0/drops/runt"), Some(&1));
        let mut two = Sample::new(Some((&before, 2.0)));
        two.answer("/roce/net", &second, false);
        assert_eq!(
            two.out,
            "/roce/net:\n  net_af_packet0:\n    rx_frames: 80350 (+40125/s)\n    dropped: 5\n    \
             tx: 6 (-0.5/s)\n    drops:\n      runt: 2 (+0.5/s)\n      bad_icrc: 0\n    \
             state: RTS\n"
        );
        // A counter the previous sample did not have (a new QP) has no rate.
        let mut three = Sample::new(Some((&before, 1.0)));
        three.answer("/roce/qp,7", &second, false);
        assert!(!three.out.contains("/s)"), "{}", three.out);
    }
}
