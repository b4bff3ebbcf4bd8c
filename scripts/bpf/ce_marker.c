// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * ce_marker: ECN marking at a bottleneck, for scripts/bottleneck.sh (tc clsact egress, direct
 * action, in front of the bottleneck's tbf qdisc).
 *
 * What it models: a switch port's phantom queue (HULL, Alizadeh et al., NSDI 2012), a RED-like
 * marker without the averaging. Every frame leaving the port adds its length to a virtual queue
 * that drains at DRAIN_FP, a fraction (95 %, chosen by bottleneck.sh) of the port's rate. A frame
 * that finds more than MARK_AT bytes ahead of it in the virtual queue gets CE if it is ECT(0) or
 * ECT(1), IPv4 or IPv6; Not-ECT frames are never changed, and nothing is dropped here (the tbf
 * drops when its real queue is full). Draining slower than the link makes the virtual queue fill
 * up as the offered load approaches the rate, so senders are told to slow down before the real
 * queue builds: the real queue stays short, at the price of 5 % of the link.
 *
 * Fixed point: the drain rate is bytes per nanosecond (0.0375 at 300 Mbit/s) times 2^FP_SHIFT,
 * and the virtual queue is kept in the same unit (bytes * 2^FP_SHIFT), so a drain of dt ns is
 * dt * DRAIN_FP with no rounding per frame. With FP_SHIFT 24, 95 % of 100 kbit/s (the lowest rate
 * bottleneck.sh takes) is 199 (0.1 % rounding), of 1 Mbit/s 1992, of 400 Gbit/s (the highest)
 * about 2^29.6. dt is capped at 2^32 ns (4.3 s; a longer idle time drains as much, which empties
 * a 64 KiB queue from 130 kbit/s up), so dt * DRAIN_FP < 2^62; the queue is capped at VQ_MAX.
 *
 * Counters (read by `bottleneck.sh status` through the bpf system call, by program id): frames
 * seen, ECT(0)/ECT(1) frames seen, CE marks set.
 *
 * Built by bottleneck.sh: clang -O2 -g -target bpf -DDRAIN_FP=N -DMARK_AT=N (-g: the spin lock
 * needs the map's BTF). None of the helpers used is GPL-only (the kernel loads it with the
 * project's own licence).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#if !defined(DRAIN_FP) || !defined(MARK_AT)
#error "define DRAIN_FP (bytes/ns * 2^24) and MARK_AT (bytes): scripts/bottleneck.sh does"
#endif

#define FP_SHIFT 24
#define DT_MAX (1ULL << 32)                 /* ns */
#define VQ_MAX ((1ULL << 30) << FP_SHIFT)   /* 1 GiB: far above any tbf limit */

#define ETH_P_IPV4 0x0800
#define ETH_P_IPV6 0x86DD
#define ECN_ECT_1 1
#define ECN_ECT_0 2

struct state {
	struct bpf_spin_lock lock; /* guards vq and last_ns: frames come from any CPU */
	__u64 vq;                  /* virtual queue, bytes * 2^FP_SHIFT */
	__u64 last_ns;             /* when vq was last brought up to date */
	__u64 packets;             /* frames seen */
	__u64 ect;                 /* ECT(0) or ECT(1) frames seen */
	__u64 marked;              /* of those, set to CE */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct state);
} ce_state SEC(".maps");

/* The ECN field of an untagged IPv4 or IPv6 frame, or -1. A VLAN tag crosses veth-join.sh's join
 * in the frame's metadata (the kernel takes it out of the frame when Xb receives it). */
static __always_inline int ecn_of(struct __sk_buff *skb)
{
	__u8 *p = (__u8 *)(long)skb->data;
	if (p + 16 > (__u8 *)(long)skb->data_end)
		return -1;
	__u16 proto = (__u16)p[12] << 8 | p[13];
	if (proto == ETH_P_IPV4 && p[14] >> 4 == 4)
		return p[15] & 3;        /* TOS byte: DSCP(6) ECN(2) */
	if (proto == ETH_P_IPV6 && p[14] >> 4 == 6)
		return p[15] >> 4 & 3;   /* version(4) traffic class(8): ECN in bits 4-5 of byte 15 */
	return -1;
}

SEC("tc")
int ce_marker(struct __sk_buff *skb)
{
	__u32 key = 0;
	struct state *s = bpf_map_lookup_elem(&ce_state, &key);
	if (!s)
		return TC_ACT_OK;
	__sync_fetch_and_add(&s->packets, 1);
	int ecn = ecn_of(skb);
	__u64 now = bpf_ktime_get_ns();
	__u64 len = (__u64)skb->len << FP_SHIFT;

	bpf_spin_lock(&s->lock);
	/* Another CPU may have moved last_ns past our clock reading: no time passed, then. */
	__u64 dt = now > s->last_ns ? now - s->last_ns : 0;
	if (dt > DT_MAX)
		dt = DT_MAX;
	__u64 drained = dt * DRAIN_FP;
	__u64 ahead = s->vq > drained ? s->vq - drained : 0; /* ahead of this frame */
	s->vq = ahead + len < VQ_MAX ? ahead + len : VQ_MAX;
	if (now > s->last_ns)
		s->last_ns = now;
	bpf_spin_unlock(&s->lock);

	if (ecn != ECN_ECT_0 && ecn != ECN_ECT_1)
		return TC_ACT_OK;
	__sync_fetch_and_add(&s->ect, 1);
	if (ahead > ((__u64)MARK_AT << FP_SHIFT)) {
		/* A header shared with a clone (a packet tap's copy) is not writable in place:
		 * bpf_skb_ecn_set_ce would skip it. Pulling the linear part makes it private. */
		bpf_skb_pull_data(skb, 0);
		if (bpf_skb_ecn_set_ce(skb))
			__sync_fetch_and_add(&s->marked, 1);
	}
	return TC_ACT_OK;
}

char _license[] SEC("license") = "MIT OR Apache-2.0";
