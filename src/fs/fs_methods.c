/* fs_methods: placeholder table until the filesystem API lands (issue 3). */
#include "rpc/rpc.h"

const struct rpc_method fs_methods[] = {
    {NULL, NULL, NULL},
};
