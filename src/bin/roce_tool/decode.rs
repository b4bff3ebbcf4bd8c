//! `roce-tool decode FILE.pcap`: one line per frame (`dpdk_roce::decode::summarize`), then the
//! totals. Exit status 0 when every RoCEv2 frame is valid, 1 when any is bad, 2 when the file
//! cannot be read as a classic Ethernet pcap.

use dpdk_roce::decode::{summarize_with_ports, Verdict};
use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct DecodeArgs {
    /// Classic pcap file with Ethernet frames (tcpdump, ibdump, `roce-tool simulate`).
    pub file: PathBuf,
    /// Another UDP destination port to decode as RoCEv2 besides 4791 (repeatable).
    #[arg(long = "udp-port", value_name = "N")]
    pub udp_ports: Vec<u16>,
}

/// Frame counts by verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Totals {
    frames: u64,
    valid: u64,
    bad_icrc: u64,
    bad_other: u64,
    other: u64,
}

impl Totals {
    fn add(&mut self, v: Verdict) {
        self.frames += 1;
        match v {
            Verdict::Valid => self.valid += 1,
            Verdict::BadIcrc => self.bad_icrc += 1,
            Verdict::BadLength | Verdict::BadHeader => self.bad_other += 1,
            Verdict::NotRoce => self.other += 1,
        }
    }

    fn rocev2(&self) -> u64 {
        self.valid + self.bad_icrc + self.bad_other
    }
}

impl fmt::Display for Totals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frames: {}, rocev2: {}, valid: {}, bad icrc: {}, bad length/headers: {}, other: {}",
            self.frames,
            self.rocev2(),
            self.valid,
            self.bad_icrc,
            self.bad_other,
            self.other
        )
    }
}

/// Why decoding stopped before the end of the file.
enum Failure {
    /// The capture could not be read (exit 2).
    Input(String),
    /// Writing to stdout failed (a closed pipe ends quietly).
    Output(io::Error),
}

pub fn run(args: &DecodeArgs) -> ExitCode {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut totals = Totals::default();
    let result = decode(args, &mut out, &mut totals);
    let flushed = out.flush();
    match (result, flushed) {
        (Err(Failure::Output(e)), _) | (Ok(()), Err(e)) => {
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("roce-tool decode: writing output: {e}");
            }
            ExitCode::from(2)
        }
        (Err(Failure::Input(msg)), _) => {
            eprintln!("roce-tool decode: {}: {msg}", args.file.display());
            ExitCode::from(2)
        }
        (Ok(()), Ok(())) if totals.rocev2() == totals.valid => ExitCode::SUCCESS,
        (Ok(()), Ok(())) => ExitCode::from(1),
    }
}

fn decode(args: &DecodeArgs, out: &mut impl Write, totals: &mut Totals) -> Result<(), Failure> {
    let file = File::open(&args.file).map_err(|e| Failure::Input(e.to_string()))?;
    let mut reader = PcapReader::new(file).map_err(|e| Failure::Input(not_pcap(args, e)))?;
    let link = reader.header().datalink;
    if link != DataLink::ETHERNET {
        return Err(Failure::Input(format!(
            "link type {link:?} is not supported (Ethernet only)"
        )));
    }
    while let Some(packet) = reader.next_packet() {
        let packet = packet.map_err(|e| {
            // Print what was read before the bad record, then stop.
            let _ = writeln!(out, "{totals}");
            Failure::Input(format!("after frame {}: {e}", totals.frames))
        })?;
        let summary = summarize_with_ports(&packet.data, &args.udp_ports);
        totals.add(summary.verdict);
        let t = packet.timestamp;
        write!(
            out,
            "{:04}  t={}.{:06}  {summary}",
            totals.frames,
            t.as_secs(),
            t.subsec_micros()
        )
        .map_err(Failure::Output)?;
        if packet.orig_len as usize > packet.data.len() {
            // Cut by the capture's snap length: the frame on the wire was longer.
            write!(
                out,
                " [captured {} of {} bytes]",
                packet.data.len(),
                packet.orig_len
            )
            .map_err(Failure::Output)?;
        }
        writeln!(out).map_err(Failure::Output)?;
    }
    writeln!(out, "{totals}").map_err(Failure::Output)
}

/// Why the file is not a classic pcap, with a hint for pcapng.
fn not_pcap(args: &DecodeArgs, e: pcap_file::PcapError) -> String {
    const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
    let mut magic = [0u8; 4];
    let read = File::open(&args.file).and_then(|mut f| f.read_exact(&mut magic));
    if read.is_ok() && magic == PCAPNG_MAGIC {
        "pcapng is not supported; convert it with `editcap -F pcap IN OUT` (dpdk-dumpcap writes \
         classic pcap with -P)"
            .to_string()
    } else {
        format!("not a pcap file: {e}")
    }
}
