/*
 * The IB extension entry of the provider table. libdat2 forwards dat_extension_op(handle, op, ...)
 * as handle_extendedop(handle, op, va_list); the argument order per op is the one of the
 * dat_ib_post_* and dat_ib_query/print_counters macros in dat_ib_extensions.h (DAT IB
 * extensions 2.0).
 */
#include <string.h>
#include "shim.h"

int shim_dat_unpack(DAT_EXTENDED_OP op, va_list args, shim_dat_ext_args *out)
{
    memset(out, 0, sizeof(*out));
    out->op = (DAT_IB_OP)op;
    switch ((DAT_IB_OP)op) {
    case DAT_IB_FETCH_AND_ADD_OP:
        out->add_or_cmp = va_arg(args, DAT_UINT64);
        out->local_iov = va_arg(args, DAT_LMR_TRIPLET *);
        out->cookie = va_arg(args, DAT_DTO_COOKIE);
        out->remote_iov = va_arg(args, DAT_RMR_TRIPLET *);
        out->flags = va_arg(args, DAT_COMPLETION_FLAGS);
        out->segments = 1;
        return 0;
    case DAT_IB_CMP_AND_SWAP_OP:
        out->add_or_cmp = va_arg(args, DAT_UINT64);
        out->swap = va_arg(args, DAT_UINT64);
        out->local_iov = va_arg(args, DAT_LMR_TRIPLET *);
        out->cookie = va_arg(args, DAT_DTO_COOKIE);
        out->remote_iov = va_arg(args, DAT_RMR_TRIPLET *);
        out->flags = va_arg(args, DAT_COMPLETION_FLAGS);
        out->segments = 1;
        return 0;
    case DAT_IB_RDMA_WRITE_IMMED_OP:
        out->segments = va_arg(args, DAT_COUNT);
        out->local_iov = va_arg(args, DAT_LMR_TRIPLET *);
        out->cookie = va_arg(args, DAT_DTO_COOKIE);
        out->remote_iov = va_arg(args, DAT_RMR_TRIPLET *);
        out->immed_data = va_arg(args, DAT_UINT32);
        out->flags = va_arg(args, DAT_COMPLETION_FLAGS);
        return 0;
    case DAT_IB_QUERY_COUNTERS_OP:
        out->counter = va_arg(args, int);
        out->counters_out = va_arg(args, DAT_UINT64 *);
        out->reset = va_arg(args, int);
        return 0;
    case DAT_IB_PRINT_COUNTERS_OP:
        out->counter = va_arg(args, int);
        out->reset = va_arg(args, int);
        return 0;
    default:
        return -1;
    }
}

static shim_dat_ext_handler ext_handler;

void shim_dat_set_extension_handler(shim_dat_ext_handler handler)
{
    __atomic_store_n(&ext_handler, handler, __ATOMIC_RELEASE);
}

DAT_RETURN shim_dat_handle_extendedop(DAT_HANDLE handle, DAT_EXTENDED_OP op, va_list args)
{
    shim_dat_ext_args a;
    shim_dat_ext_handler h = __atomic_load_n(&ext_handler, __ATOMIC_ACQUIRE);
    if (shim_dat_unpack(op, args, &a) != 0)
        return (DAT_RETURN)(DAT_CLASS_ERROR | DAT_NOT_IMPLEMENTED);
    if (h == NULL)
        return (DAT_RETURN)(DAT_CLASS_ERROR | DAT_INTERNAL_ERROR);
    return h(handle, &a);
}

int shim_dat_unpack_variadic(shim_dat_ext_args *out, DAT_EXTENDED_OP op, ...)
{
    va_list ap;
    int rc;
    va_start(ap, op);
    rc = shim_dat_unpack(op, ap, out);
    va_end(ap);
    return rc;
}

DAT_RETURN shim_dat_call_extendedop_variadic(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
{
    va_list ap;
    DAT_RETURN rc;
    va_start(ap, op);
    rc = shim_dat_handle_extendedop(handle, op, ap);
    va_end(ap);
    return rc;
}
