#ifndef DAT_ROCE_SHIM_H
#define DAT_ROCE_SHIM_H
#include <stdarg.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

/*
 * One IB extension operation with its variadic arguments unpacked (dat_ib_extensions.h,
 * the dat_ib_post_* macros). Stable Rust cannot read a va_list, so
 * shim_dat_handle_extendedop unpacks it into this struct and calls the Rust side.
 */
typedef struct shim_dat_ext_args {
    DAT_IB_OP op;
    DAT_UINT64 add_or_cmp;      /* FETCH_AND_ADD: add value; CMP_AND_SWAP: compare value */
    DAT_UINT64 swap;            /* CMP_AND_SWAP: swap value */
    DAT_COUNT segments;         /* RDMA_WRITE_IMMED: number of local segments */
    DAT_LMR_TRIPLET *local_iov;
    DAT_DTO_COOKIE cookie;
    const DAT_RMR_TRIPLET *remote_iov;
    DAT_UINT32 immed_data;      /* RDMA_WRITE_IMMED */
    DAT_COMPLETION_FLAGS flags;
    int counter;                /* QUERY/PRINT_COUNTERS: one DCNT_* index or *_ALL_COUNTERS */
    DAT_UINT64 *counters_out;   /* QUERY_COUNTERS: where the value(s) go */
    int reset;                  /* QUERY/PRINT_COUNTERS: zero the counters after reading */
} shim_dat_ext_args;

/* The provider's handler of one unpacked extension operation (set once at provider init). */
typedef DAT_RETURN (*shim_dat_ext_handler)(DAT_HANDLE handle, const shim_dat_ext_args *args);
void shim_dat_set_extension_handler(shim_dat_ext_handler handler);

/* The DAT_PROVIDER.handle_extendedop entry: unpacks the va_list, calls the handler
 * (DAT_NOT_IMPLEMENTED for operations this provider does not offer, e.g. UD and collectives). */
DAT_RETURN shim_dat_handle_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args);

/* Unpacks without calling (for tests): returns 0 when `op` is a supported operation. */
int shim_dat_unpack(DAT_EXTENDED_OP op, va_list args, shim_dat_ext_args *out);

/* Test helper: unpacks the variadic arguments of one call the way dat_extension_op passes them. */
int shim_dat_unpack_variadic(shim_dat_ext_args *out, DAT_EXTENDED_OP op, ...);

/* Test helper: dat_extension_op as libdat2 forwards it, through the handler. */
DAT_RETURN shim_dat_call_extendedop_variadic(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...);

#endif
