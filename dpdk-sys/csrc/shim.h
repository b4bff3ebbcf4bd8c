/*
 * Real (linkable) symbols for the DPDK functions that are `static inline` in the headers and
 * therefore invisible to bindgen. Each one forwards to the DPDK function of the same name without
 * the `shim_` prefix. Also: rte_errno (a per-lcore thread-local) and a few macro constants that
 * bindgen cannot evaluate.
 */
#ifndef DPDK_ROCE_SHIM_H
#define DPDK_ROCE_SHIM_H

#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;
struct rte_mbuf_ext_shared_info;

typedef void (*shim_extbuf_free_cb)(void *addr, void *opaque);

/* ethdev fast path */
uint16_t shim_rte_eth_rx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **rx_pkts,
                               uint16_t nb_pkts);
uint16_t shim_rte_eth_tx_burst(uint16_t port_id, uint16_t queue_id, struct rte_mbuf **tx_pkts,
                               uint16_t nb_pkts);

/* mbuf */
struct rte_mbuf *shim_rte_pktmbuf_alloc(struct rte_mempool *mp);
int shim_rte_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned int count);
void shim_rte_pktmbuf_free(struct rte_mbuf *m);
char *shim_rte_pktmbuf_mtod(struct rte_mbuf *m);
char *shim_rte_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
char *shim_rte_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len);
char *shim_rte_pktmbuf_adj(struct rte_mbuf *m, uint16_t len);
int shim_rte_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);
int shim_rte_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail);
uint16_t shim_rte_pktmbuf_data_len(const struct rte_mbuf *m);
uint32_t shim_rte_pktmbuf_pkt_len(const struct rte_mbuf *m);
uint16_t shim_rte_pktmbuf_headroom(const struct rte_mbuf *m);
uint16_t shim_rte_pktmbuf_tailroom(const struct rte_mbuf *m);
int shim_rte_pktmbuf_is_external(const struct rte_mbuf *m);
void shim_rte_pktmbuf_attach_extbuf(struct rte_mbuf *m, void *buf_addr, uint64_t buf_iova,
                                    uint16_t buf_len, struct rte_mbuf_ext_shared_info *shinfo);
struct rte_mbuf_ext_shared_info *shim_rte_pktmbuf_ext_shinfo_init_helper(
    void *buf_addr, uint16_t *buf_len, shim_extbuf_free_cb free_cb, void *fcb_opaque);
/* Initialise caller-owned shared info (instead of carving it out of the buffer's tail). */
void shim_rte_mbuf_ext_shinfo_init(struct rte_mbuf_ext_shared_info *shinfo,
                                   shim_extbuf_free_cb free_cb, void *fcb_opaque);
uint16_t shim_rte_mbuf_ext_refcnt_read(const struct rte_mbuf_ext_shared_info *shinfo);

/* EAL */
int shim_rte_errno(void);
void shim_rte_errno_set(int value);
uint64_t shim_rte_rdtsc(void);
unsigned int shim_rte_lcore_id(void);

/* constants that are macros with casts */
uint64_t shim_rte_bad_iova(void);
uint16_t shim_rte_pktmbuf_headroom_default(void);
uint16_t shim_rte_mbuf_default_buf_size(void);

#endif
