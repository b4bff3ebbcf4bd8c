/* Everything a DAT 2.0 provider implements or calls, as the system headers define it. */
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/udat_redirection.h>
#include <dat2/dat_ib_extensions.h>
#include "shim.h"
