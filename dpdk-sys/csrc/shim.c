/* See shim.h. Compiled with DPDK's own cflags (pkg-config libdpdk --cflags). */
#include <stddef.h>

#include <rte_config.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_mempool.h>

#include "shim.h"

/*
 * The Rust side (dpdk-sys/src/lib.rs) asserts the same offsets on the bindgen layout; both sides
 * are checked against these numbers at compile time, so a DPDK with a different rte_mbuf layout
 * fails the build instead of corrupting packets.
 */
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "rte_mbuf.buf_addr");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "rte_mbuf.data_off");
_Static_assert(offsetof(struct rte_mbuf, nb_segs) == 20, "rte_mbuf.nb_segs");
_Static_assert(offsetof(struct rte_mbuf, port) == 22, "rte_mbuf.port");
_Static_assert(offsetof(struct rte_mbuf, ol_flags) == 24, "rte_mbuf.ol_flags");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "rte_mbuf.pkt_len");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "rte_mbuf.data_len");
_Static_assert(offsetof(struct rte_mbuf, buf_len) == 54, "rte_mbuf.buf_len");
_Static_assert(offsetof(struct rte_mbuf, pool) == 56, "rte_mbuf.pool");
_Static_assert(offsetof(struct rte_mbuf, next) == 64, "rte_mbuf.next");
_Static_assert(sizeof(struct rte_mbuf) == 128, "rte_mbuf size");
_Static_assert(sizeof(struct rte_ether_addr) == 6, "rte_ether_addr size");
/* A macro expression bindgen cannot evaluate; mirrored as a constant in src/lib.rs. */
_Static_assert(RTE_MEMPOOL_NAMESIZE == 26, "RTE_MEMPOOL_NAMESIZE");

uint16_t shim_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
                               uint16_t nb_pkts)
{
	return rte_eth_rx_burst(port_id, queue_id, rx_pkts, nb_pkts);
}

uint16_t shim_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
                               uint16_t nb_pkts)
{
	return rte_eth_tx_burst(port_id, queue_id, tx_pkts, nb_pkts);
}

struct rte_mbuf *shim_rte_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int shim_rte_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int count)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, count);
}

void shim_rte_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

char *shim_rte_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, char *);
}

char *shim_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_append(m, len);
}

char *shim_rte_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_prepend(m, len);
}

char *shim_rte_pktmbuf_adj(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_adj(m, len);
}

int shim_rte_pktmbuf_trim(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_trim(m, len);
}

int shim_rte_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail)
{
	return rte_pktmbuf_chain(head, tail);
}

uint16_t shim_rte_pktmbuf_data_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_data_len(m);
}

uint32_t shim_rte_pktmbuf_pkt_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m);
}

uint16_t shim_rte_pktmbuf_headroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_headroom(m);
}

uint16_t shim_rte_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(m);
}

int shim_rte_pktmbuf_is_external(const struct rte_mbuf *m)
{
	return RTE_MBUF_HAS_EXTBUF(m) ? 1 : 0;
}

void shim_rte_pktmbuf_attach_extbuf(struct rte_mbuf *m, void *buf_addr, uint64_t buf_iova,
                                    uint16_t buf_len, struct rte_mbuf_ext_shared_info *shinfo)
{
	rte_pktmbuf_attach_extbuf(m, buf_addr, (rte_iova_t)buf_iova, buf_len, shinfo);
}

struct rte_mbuf_ext_shared_info *shim_rte_pktmbuf_ext_shinfo_init_helper(
    void *buf_addr, uint16_t *buf_len, shim_extbuf_free_cb free_cb, void *fcb_opaque)
{
	return rte_pktmbuf_ext_shinfo_init_helper(buf_addr, buf_len, free_cb, fcb_opaque);
}

void shim_rte_mbuf_ext_shinfo_init(struct rte_mbuf_ext_shared_info *shinfo,
                                   shim_extbuf_free_cb free_cb, void *fcb_opaque)
{
	shinfo->free_cb = free_cb;
	shinfo->fcb_opaque = fcb_opaque;
	rte_mbuf_ext_refcnt_set(shinfo, 1);
}

uint16_t shim_rte_mbuf_ext_refcnt_read(const struct rte_mbuf_ext_shared_info *shinfo)
{
	return rte_mbuf_ext_refcnt_read(shinfo);
}

int shim_rte_errno(void)
{
	return rte_errno;
}

void shim_rte_errno_set(int value)
{
	rte_errno = value;
}

uint64_t shim_rte_rdtsc(void)
{
	return rte_rdtsc();
}

unsigned int shim_rte_lcore_id(void)
{
	return rte_lcore_id();
}

uint64_t shim_rte_bad_iova(void)
{
	return (uint64_t)RTE_BAD_IOVA;
}

uint16_t shim_rte_pktmbuf_headroom_default(void)
{
	return RTE_PKTMBUF_HEADROOM;
}

uint16_t shim_rte_mbuf_default_buf_size(void)
{
	return RTE_MBUF_DEFAULT_BUF_SIZE;
}
