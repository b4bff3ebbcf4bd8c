/* The DPDK headers bindgen reads (allow-listed in build.rs), plus the shim's declarations. */
#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_memzone.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ether.h>
#include <rte_ethdev.h>
#include <rte_epoll.h>
#include <rte_interrupts.h>
#include <rte_dev.h>
#include <rte_bus_vdev.h>
#include <rte_telemetry.h>
#include <rte_pdump.h>

#include "shim.h"
