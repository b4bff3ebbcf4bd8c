//! Bad input at a real DPDK port (`roce-dpdk-bad-input` over net_af_packet on a veth pair made
//! here): an attacker port injects random bytes, truncated frames, wrong ICRCs and checksums,
//! other UDP ports, unknown QPs, a foreign P_Key, PSNs out of the window, and requests spoofing
//! the peer's connection with bad R_Keys, out-of-bounds or wrapping addresses, misaligned
//! atomics and bad opcode sequences. Each case must move the counter the spec names (the
//! neighbour layer's drop reasons, the host's, the QP's), NAK where IBTA vol. 1 §9.7.5.2 says
//! so (remote access error / invalid request, QP to ERROR, receives flushed with completions),
//! and change no registered byte (the target region's guards, a local-only region, a region of
//! another protection zone, the receive buffers). Afterwards ARP is still answered and a new
//! connection moves verified data.
//! Needs root (veth pair) and DPDK (scripts/setup.sh); fails loudly otherwise.

mod dpdk_common;
mod test_programs;
use test_programs::test_program;

use dpdk_common::{assert_no_runtime_dirs, output_text, retry_fanout_collision, Veth};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

fn bin() -> std::path::PathBuf {
    test_program("roce-dpdk-bad-input")
}

/// The cases of one run, by name.
struct Run {
    cases: BTreeMap<String, Value>,
    fin: Value,
    /// The fuzzer's report (`--fuzz`).
    fuzz: Value,
    text: String,
}

fn run_barrage() -> Run {
    run_lab("x", &[])
}

/// Runs the lab on a fresh veth pair named after `tag` with `args`. One lab at a time: each
/// checks that no process of the lab left its EAL runtime directory, which another lab's live
/// process would have.
fn run_lab(tag: &str, args: &[&str]) -> Run {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let veth = Veth::up(tag);
    let out = retry_fanout_collision(|| {
        Command::new(bin())
            .arg(veth.end('a'))
            .arg(veth.end('b'))
            .args(args)
            .output()
            .expect("run roce-dpdk-bad-input")
    });
    let text = output_text(&out);
    assert!(out.status.success(), "roce-dpdk-bad-input failed:\n{text}");
    assert!(text.contains("RESULT done"), "{text}");
    let mut cases = BTreeMap::new();
    let mut fin = Value::Null;
    let mut fuzz = Value::Null;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(j) = line.strip_prefix("FUZZ ") {
            fuzz = serde_json::from_str(j).expect("FUZZ json");
        }
        if let Some(j) = line.strip_prefix("CASE ") {
            let v: Value = serde_json::from_str(j).expect("CASE json");
            let name = v["case"].as_str().expect("case name").to_string();
            assert!(cases.insert(name.clone(), v).is_none(), "case {name} twice");
        } else if let Some(j) = line.strip_prefix("FINAL ") {
            fin = serde_json::from_str(j).expect("FINAL json");
        }
    }
    assert_no_runtime_dirs("roce-bad-input-");
    Run {
        cases,
        fin,
        fuzz,
        text,
    }
}

impl Run {
    fn case(&self, name: &str) -> &Value {
        self.cases
            .get(name)
            .unwrap_or_else(|| panic!("no case {name}:\n{}", self.text))
    }
}

fn n(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

fn qp(v: &Value, key: &str) -> u64 {
    v["qp"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("qp.{key} missing in {v}"))
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
        .iter()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

/// Every frame arrived and no registered byte changed.
fn arrived_and_memory_intact(v: &Value) {
    assert_eq!(
        n(v, "received"),
        n(v, "sent"),
        "frames lost on the veth: {v}"
    );
    assert_eq!(n(v, "mem_changed"), 0, "registered memory changed: {v}");
}

/// Dropped by the neighbour layer, every frame under `reason`; no QP saw anything, nothing
/// was sent back.
fn net_drop(run: &Run, name: &str, reason: &str) {
    let v = run.case(name);
    arrived_and_memory_intact(v);
    let sent = n(v, "sent");
    assert_eq!(v["drops"][reason].as_u64(), Some(sent), "{v}");
    assert_eq!(n(v, "dropped_total"), sent, "{v}");
    assert_eq!(n(v, "rx_roce"), 0, "{v}");
    assert_eq!(qp(v, "packets_received"), 0, "{v}");
    assert!(strings(v, "naks").is_empty(), "{v}");
    assert_eq!(v["state"], "Rts", "{v}");
}

/// A request the responder refuses: one NAK with `nak` on the wire, the QP in ERROR, its two
/// posted receives completed (flushed, or `first_recv` for the one being filled), nothing
/// executed.
fn fatal(run: &Run, name: &str, nak: &str, first_recv: &str) {
    let v = run.case(name);
    arrived_and_memory_intact(v);
    assert_eq!(strings(v, "naks"), vec![nak.to_string()], "{v}");
    assert_eq!(qp(v, "fatal_naks_sent"), 1, "{v}");
    assert_eq!(v["state"], "Error", "{v}");
    assert_eq!(
        strings(v, "completions"),
        vec![first_recv.to_string(), "WrFlushErr".to_string()],
        "{v}"
    );
    assert_eq!(n(v, "acks"), 0, "{v}");
    assert_eq!(n(v, "read_responses"), 0, "{v}");
    assert_eq!(n(v, "atomic_acks"), 0, "{v}");
    // The peer ignores a NAK for a PSN it never sent (a ghost response).
    assert_eq!(v["peer_state"], "Rts", "{v}");
}

fn verified(run: &Run, name: &str) {
    let v = run.case(name);
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(n(v, "mem_changed"), 0, "{v}");
}

#[test]
fn bad_input_is_counted_dropped_or_naked_and_touches_no_memory_over_af_packet() {
    let run = run_barrage();

    // Neighbour layer: each malformation under its own drop reason.
    let v = run.case("random_bytes");
    arrived_and_memory_intact(v);
    assert_eq!(n(v, "dropped_total"), n(v, "sent"), "{v}");
    assert_eq!(n(v, "rx_roce"), 0, "{v}");
    net_drop(&run, "truncated_at_header_boundaries", "malformed_ip");
    net_drop(&run, "truncated_transport_headers", "roce_length");
    net_drop(&run, "wrong_icrc", "bad_icrc");
    net_drop(&run, "wrong_ipv4_checksum", "bad_ip_checksum");
    net_drop(&run, "udp_port_not_4791", "not_roce_port");
    net_drop(&run, "not_our_ip", "not_our_ip");

    // Random transport bytes: every frame is dropped by the parser or the host (no QP exists
    // for a random QPN), none reaches the connected QP.
    let v = run.case("random_transport_bytes");
    arrived_and_memory_intact(v);
    assert_eq!(
        n(v, "dropped_total") + n(v, "unknown_qp") + n(v, "bad_gsi"),
        n(v, "sent"),
        "{v}"
    );
    assert_eq!(qp(v, "packets_received"), 0, "{v}");

    // Host: valid RoCEv2 for a QP that does not exist; QP1 traffic that is not GSI.
    let v = run.case("unknown_dest_qpn");
    arrived_and_memory_intact(v);
    assert_eq!(n(v, "unknown_qp"), n(v, "sent"), "{v}");
    assert_eq!(qp(v, "packets_received"), 0, "{v}");
    let v = run.case("qp1_not_gsi");
    arrived_and_memory_intact(v);
    assert_eq!(n(v, "bad_gsi"), n(v, "sent"), "{v}");
    let v = run.case("qp1_foreign_pkey");
    arrived_and_memory_intact(v);
    assert_eq!(n(v, "bad_gsi"), 1, "{v}");

    // From another address than the connection's peer: dropped before the QP.
    let v = run.case("from_another_address");
    arrived_and_memory_intact(v);
    assert_eq!(n(v, "wrong_origin"), 1, "{v}");
    assert_eq!(qp(v, "packets_received"), 0, "{v}");
    assert!(strings(v, "naks").is_empty() && n(v, "acks") == 0, "{v}");
    assert_eq!(v["state"], "Rts", "{v}");

    // QP, silently: a foreign P_Key (valid R_Key and PSN, still nothing written).
    let v = run.case("wrong_pkey");
    arrived_and_memory_intact(v);
    assert_eq!(qp(v, "dropped"), 1, "{v}");
    assert!(strings(v, "naks").is_empty() && n(v, "acks") == 0, "{v}");
    assert_eq!(v["state"], "Rts", "{v}");

    // PSN 2^22 behind: a duplicate, re-ACKed, not executed again.
    let v = run.case("psn_far_behind_duplicate");
    arrived_and_memory_intact(v);
    assert_eq!(qp(v, "duplicates"), 1, "{v}");
    assert_eq!(n(v, "acks"), 1, "{v}");
    assert!(strings(v, "naks").is_empty(), "{v}");
    assert_eq!(v["state"], "Rts", "{v}");

    // PSN 2^22 ahead: one PSN sequence error NAK, then silence; the QP stays usable.
    let v = run.case("psn_far_ahead");
    arrived_and_memory_intact(v);
    assert_eq!(strings(v, "naks"), vec!["PsnSequenceError"], "{v}");
    assert_eq!(qp(v, "seq_naks_sent"), 1, "{v}");
    assert_eq!(v["state"], "Rts", "{v}");
    let v = run.case("psn_far_ahead_again");
    arrived_and_memory_intact(v);
    assert!(strings(v, "naks").is_empty(), "{v}");
    assert_eq!(qp(v, "dropped"), 1, "{v}");
    verified(&run, "legit_traffic_after_bad_psns");

    // A duplicate READ is checked again: out of bounds, it is dropped, nothing is read out.
    let v = run.case("duplicate_read_out_of_bounds");
    arrived_and_memory_intact(v);
    assert_eq!(qp(v, "duplicates"), 2, "{v}");
    assert_eq!(qp(v, "dropped"), 2, "{v}");
    assert_eq!(n(v, "read_responses"), 0, "{v}");
    assert_eq!(v["state"], "Rts", "{v}");

    // R_Key, rights, protection zone, bounds: NAK remote access error, QP to ERROR
    // (§9.7.5.2.3); lengths beyond the maximum message, misaligned atomics and bad opcode
    // sequences: NAK invalid request (§9.7.5.2.2, §9.4.5, §9.7.5.1.3).
    for name in [
        "write_wrong_rkey_spoofing_peer",
        "write_freed_rkey",
        "write_rkey_of_other_pz",
        "write_region_without_remote_rights",
        "write_just_past_the_end",
        "write_into_the_next_region_with_target_rkey",
        "write_first_huge_length",
        "write_address_wraps",
        "read_out_of_bounds",
        "read_address_wraps",
        "atomic_out_of_bounds",
    ] {
        fatal(&run, name, "RemoteAccessError", "WrFlushErr");
    }
    for name in [
        "write_first_length_beyond_max_message",
        "write_middle_without_first",
        "atomic_misaligned",
    ] {
        fatal(&run, name, "InvalidRequest", "WrFlushErr");
    }
    // A SEND longer than the receive: the receive completes with a length error, the next is
    // flushed, nothing is scattered.
    fatal(
        &run,
        "send_longer_than_the_receive",
        "InvalidRequest",
        "LocLenErr",
    );

    // A zero-length WRITE accesses no memory: ACKed whatever its R_Key and address.
    let v = run.case("write_zero_length_unchecked_rkey");
    arrived_and_memory_intact(v);
    assert_eq!(n(v, "acks"), 1, "{v}");
    assert!(strings(v, "naks").is_empty(), "{v}");
    assert_eq!(v["state"], "Rts", "{v}");

    // Random requests at a live QP: whatever they provoke, every frame is accounted for and no
    // memory changes.
    let v = run.case("random_requests_to_a_live_qp");
    arrived_and_memory_intact(v);
    assert_eq!(n(v, "dropped_total") + n(v, "rx_roce"), n(v, "sent"), "{v}");
    assert_eq!(n(v, "read_responses") + n(v, "atomic_acks"), 0, "{v}");

    // The engine still runs: ARP answered, a new connection moves verified data, and no
    // registered byte changed except by legitimate traffic.
    verified(&run, "new_connection_after_barrage");
    let f = &run.fin;
    assert_eq!(f["arp_replies"], 1, "{f}");
    assert_eq!(f["arp_reply_on_wire"], true, "{f}");
    assert_eq!(f["mem_changed"], 0, "{f}");
    assert_eq!(f["cases"].as_u64(), Some(run.cases.len() as u64 - 2), "{f}");
}

/// The seeded mutation fuzzer at the live port (`--fuzz`): 10^5 frames mutated from the peer's
/// real ARP, CM and RC traffic, most resealed so they pass the neighbour layer. The victim
/// survives, counts them, changes no byte that the fuzzed connection's key does not reach;
/// the fuzzed frames reached the transport and the CM; the quiet connection and a new one move
/// verified data afterwards and ARP is answered.
#[test]
fn a_live_port_survives_a_mutation_fuzzer_of_rc_cm_and_arp_frames_over_af_packet() {
    const FRAMES: u64 = 100_000;
    let run = run_lab("z", &["--seed", "5", "--fuzz", &FRAMES.to_string()]);
    let f = &run.fuzz;
    assert!(f.is_object(), "no FUZZ report:\n{}", run.text);
    println!("FUZZ {f}");
    assert_eq!(n(f, "sent") + n(f, "refused_by_tx_ring"), FRAMES, "{f}");
    assert!(n(f, "sent") >= FRAMES * 99 / 100, "{f}");
    assert!(n(f, "received") >= n(f, "sent") * 9 / 10, "{f}");
    assert!(n(f, "resealed") >= FRAMES / 2, "{f}");
    for kind in ["random", "truncated", "bit_flips", "field", "resized"] {
        assert!(
            f["mutations"][kind].as_u64() > Some(FRAMES / 50),
            "{kind}: {f}"
        );
    }
    // They reached the neighbour layer's checks, the transport and the CM.
    for reason in ["bad_icrc", "malformed_ip", "not_our_ip"] {
        assert!(f["drops"][reason].as_u64() > Some(0), "{reason}: {f}");
    }
    assert!(n(f, "rx_roce") >= FRAMES / 4, "{f}");
    assert!(
        f["fuzzed_qp"]["packets_received"].as_u64() > Some(FRAMES / 20),
        "{f}"
    );
    for kind in ["req", "rtu", "dreq", "malformed"] {
        assert!(f["cm"][kind].as_u64() > Some(0), "CM {kind}: {f}");
    }
    assert_eq!(n(f, "protected_changed"), 0, "{f}");
    assert_eq!(f["quiet_state"], "Rts", "{f}");
    verified_data(&run, "quiet_connection_after_fuzz");
    verified_data(&run, "new_connection_after_barrage");
    assert_eq!(run.fin["arp_reply_on_wire"], true, "{}", run.fin);
}

/// A case that moved verified data (the fuzzer may have changed the target and receive
/// buffers before it, so registered memory is not compared here).
fn verified_data(run: &Run, name: &str) {
    let v = run.case(name);
    assert_eq!(v["verified"], true, "{v}");
}
